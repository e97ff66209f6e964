// Package servicetest is a fake of the sales enablement service for tests and
// for `sepipe simulate`, built like net/http/httptest.
//
// [New] returns a [Service], an [http.Handler] that can be mounted on any
// [http.Server]; [NewServer] starts one on a loopback httptest server and
// hands back its URL and a client.
//
// The fake currently implements the Coach reporting interface (section B of
// the interface document) under [BasePath]:
//
//	GET /objects                     list of report objects
//	GET /objects/{id}/describe       fields of one object
//	GET /objects/{id}?parameters=…   one page of rows (Base64 JSON query)
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
// Not yet implemented: the legacy session interface, v3 assets, v4 shares
// and themes, webhooks, fault injection and an advancing clock.
package servicetest
