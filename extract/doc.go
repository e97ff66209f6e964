// Package extract is the first stage of sepipe: a client of the sales
// enablement service, every interface of shared/service-interface.md:
// Coach reporting (B, base {tenant}/api/learn/reporting/v3/json), the
// legacy session interface (A), shares and themes (C, v4), webhook
// subscriptions (D) and the v3 resource collections (E).
//
// What it does:
//   - lists report objects (Objects), describes their fields (Describe),
//     builds, validates and encodes queries (Query), and reads every page of
//     an object (ReadObject) handing raw JSON pages to a PageFunc;
//   - creates legacy sessions, user tickets and auto-login tokens; creates
//     shares, lists and reads themes; creates, updates, deletes, reads and
//     lists webhook subscriptions and their logs; reads v3 collections by
//     offset (ReadCollection, Assets), keeping untyped fields in Extra;
//   - reconciles every paged read (totals, page sizes, repeated pages, key
//     duplicates) and heals drift by reading again from the start
//     (WithHealing), telling the caller to discard (Page.Restart,
//     CollectionPage.Restart); what it cannot heal is an *IntegrityError;
//   - sends every request through one budget (budget.go): an adaptive
//     concurrency limit (AIMD on 429) and one shared rate limiter;
//   - retries reads (429 honouring Retry-After, 5xx, dropped connections,
//     bodies cut short) within a budget of attempts and total wait; never
//     retries a create or update once it may have reached the service
//     (*UncertainError says whether it may have taken effect); refreshes an
//     expired access token once (WithTokenSource); turns both error body
//     styles into *APIError naming the credential on 401/403.
//
// What it does not do:
//   - it does not decode report rows or map field types (schemas and
//     transform own that);
//   - it does not obtain OAuth tokens (WithTokenSource gives it a way to
//     ask for one);
//   - it does not write anything or keep state between runs.
//
// Credentials (tokens, passwords, session keys and ids, tickets, signature
// keys) never appear in errors or logs: URLs are logged only through
// RedactURL, credential values are scrubbed from messages, and values the
// service hands out are Secrets that print as REDACTED.
package extract
