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
//     lists webhook subscriptions and their logs, reading the typed items'
//     times (Share, Theme, Subscription, DeliveryLog) in any ISO 8601 form
//     with service.ParseTime, as the sync's decoder reads them (one it
//     cannot read is left zero, its item kept: times.go); reads every
//     offset-paged list (v3 collections, v4 themes, subscriptions, a
//     delivery log) page by page, handing raw JSON pages to the same
//     PageFunc (ReadList), and says which interfaces it holds credentials
//     for (CanRead);
//   - reconciles every paged read (totals, page sizes, repeated pages, and
//     the duplicate keys the PageFunc's decoder reports in service.PageInfo.Keys)
//     and heals drift by reading again from the start (WithHealing),
//     telling the caller to discard (Page.Restart); what it cannot heal is
//     an *IntegrityError. A read's keys stay in memory up to a few hundred
//     thousand; past that they spill to a file (WithSpillFiles)
//     and memory keeps a Bloom filter of them (keyset.go), so a duplicate
//     may be found only when the read ends;
//   - sends every request through one budget (budget.go): an adaptive
//     concurrency limit (AIMD on 429) and one shared, adaptive rate that
//     finds the service's limit instead of assuming it: it starts at
//     DefaultStartRate, doubles while the limiter holds requests back, and
//     on a 429 (once per round) drops just under the rate the service
//     accepted in its window, then climbs back along a cubic and probes
//     above; a limit the 429 announces and the count confirms is taken as
//     the service's word (closer under it, probed seldom); WithRateLimit
//     sets a ceiling on it, WithoutRateLimit turns it off;
//   - retries reads (429 honouring Retry-After, 5xx, dropped connections,
//     bodies cut short) within a budget of attempts and total wait; never
//     retries a create or update once it may have reached the service
//     (*UncertainError says whether it may have taken effect); refreshes an
//     expired access token once (WithOAuth, WithTokenSource); turns both
//     error body styles into *APIError naming the credential on 401/403;
//   - refreshes OAuth 2.0 access tokens (oauth.go, with golang.org/x/oauth2)
//     before they expire and on a 401, keeping the rotating refresh token
//     in a TokenStore (FileTokenStore: one 0600 file, replaced atomically,
//     locked around a refresh across processes);
//   - honours an announced request quota (quota.go): X-RateLimit-* and
//     RateLimit-* headers and a 429 body's meta.rateLimit; it never sends
//     past the quota, waits for a reset within the retry budget's wait, and
//     fails with a *QuotaError (ErrQuotaExhausted, and when the quota
//     resets) otherwise; a report object's read reserves the requests for
//     its remaining pages first.
//
// Receiving webhook deliveries is the webhooks package's job.
//
// What it does not do:
//   - it does not decode report rows or map field types (schemas and
//     transform own that);
//   - it writes nothing and keeps no state between runs but the OAuth
//     token store it is given.
//
// Credentials (tokens, passwords, session keys and ids, tickets, signature
// keys) never appear in errors or logs: URLs are logged only through
// service.RedactURL, credential values are scrubbed from messages, and values the
// service hands out are Secrets that print as REDACTED.
//
// Imports of sepipe's: internal/flock, service.
package extract
