// Package servicetest is a fake of the sales enablement service for tests and
// for `sepipe simulate`, built like net/http/httptest.
//
// [New] returns a [Service], an [http.Handler] that can be mounted on any
// [http.Server]; [NewServer] starts one on a loopback httptest server and
// hands back its URL and a client.
//
// The fake serves every interface of the document on one listener:
//
//	[LegacyPath]   A  session.ashx, userticket.ashx, token.ashx (sid/sky/uid sessions)
//	[BasePath]     B  Coach reporting: /objects, /objects/{id}/describe, /objects/{id}?parameters=…
//	[V4Path]       C  POST /shares, GET /themes, GET /themes/{id} (and the share links under [SharePagePath])
//	[WebhooksPath] D  the six subscription operations; events are delivered, signed, retried and logged
//	[AssetsPath]   E  GET /assets.json, GET /assets/{id}.json
//	[AdminPath]       the fake's own clock endpoints, not part of the service
//
// Known identities: the company site [Service.LoginDir] ("demo") with the
// users [AdminUsername] and [UserUsername] ([Service.Password]), the OAuth
// access token [Service.AccessToken] (reporting, v3, v4) and the developer
// API token [Service.APIToken] (webhooks, admin), and the OAuth client
// ([Service.ClientID], [Service.ClientSecret]) whose token endpoint
// [OAuthTokenPath] exchanges the rotating refresh token
// [Service.RefreshToken] for access tokens (oauth.go).
//
// Beyond the faults (faults.go), options make the tenant a hard one:
// [WithLimitedToken] (no Coach licence), [WithoutV4] (no sharing plan),
// [WithQuota] (a window quota, announced and enforced), [WithHostile]
// (ids, fields and values hostile to a naive client; hostile.go),
// [WithHostileWire] (one report object per hostile wire case: a repeated
// page, endless pages, an absurd total, a huge body, a cross-origin
// redirect, silence, a stalled body; hostile_wire.go),
// [WithShapeVariants] (v3 assets whose attributes change JSON type on
// some items; assets.go) and [WithWideObject] (a report object of 64
// fields, about 2.8 KB of JSON a row; wide.go). Even without them, v3
// assets carry about 40 attributes with the variety of a real tenant:
// nested link objects, nulls, numbers sent as strings, dates with
// offsets, attributes on some items only.
//
// The tenant lives: [Service.Advance] (or [WithAutoAdvance], or POST
// /_admin/advance) moves its clock, users complete courses, and each
// completion is a COURSE_COMPLETED event delivered to the subscriptions that
// ask for it. Deliveries run in the background; [Service.WaitDeliveries]
// waits for them and [Service.Close] (called by [Server.Close]) stops them.
//
// The tenant's data is a pure function of the seed, the number of users and
// the tenant's clock ([WithSeed], [WithUsers], [WithNow]). Large objects are
// never materialised: a row is generated from a hash of (seed, object, row)
// when it is needed, and pages are encoded by appending bytes, so the fake
// can stream millions of rows without being the bottleneck of a benchmark.
//
// Every shape the fake had to decide where the interface document says
// "not shown" (result body, defaults, limits, value encodings, filter
// semantics, error bodies and codes) is recorded in docs/service-shapes.md.
//
// The package does not import the client (package extract): the fake is an
// independent reading of the contract, so that a misunderstanding in the
// client shows up as a failing test rather than as a shared assumption.
//
// Imports nothing of sepipe's.
package servicetest
