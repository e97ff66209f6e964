// Package extract is the first stage of sepipe: a client of the Coach
// reporting interface of the sales enablement service (interface section
// B, base {tenant}/api/learn/reporting/v3/json).
//
// What it does:
//   - lists report objects (Objects) and describes their fields (Describe);
//   - builds, validates (Query.Validate) and encodes (Query.Encode) the
//     Base64 JSON `parameters` document of a results request;
//   - reads every page of an object (ReadObject): page 1 first, then the
//     other pages concurrently, handing each raw JSON page to a PageFunc,
//     and reconciles the pages (totals, full pages, last page, echoed page
//     numbers, repeated pages), returning *IntegrityError on any mismatch;
//   - sends every request through one shared rate limiter, retries what can
//     be retried (429 honouring Retry-After, 500/502/503/504, network errors,
//     bodies that end early) within a budget of attempts and total wait,
//     and turns error bodies of both service styles into *APIError.
//
// What it does not do:
//   - it does not decode rows or map field types: the PageFunc receives
//     raw JSON, and Field.Type is passed on as the service wrote it
//     (schemas and transform own that);
//   - it does not obtain or refresh OAuth tokens: the caller passes a
//     bearer token with WithAccessToken;
//   - it does not talk to the legacy session, sharing or webhook
//     interfaces;
//   - it does not write anything, keep state between runs or retry a
//     whole object: a failed ReadObject means everything handed to the
//     PageFunc during that call must be discarded.
//
// The access token never appears in errors or logs; URLs are logged only
// through RedactURL.
package extract
