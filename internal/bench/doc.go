// Package bench measures a sync against the fake service on loopback, for
// `sepipe bench` (docs/performance.md): sepipe end to end (pipeline.Sync
// of one large report object), fetching and discarding the same pages
// with the same client, and DuckDB's read_json of the pages saved as
// files. Each phase may run in a child process of its own (RunPhase), so
// its peak resident memory is its own; with Config.RateLimit the sync
// reads a second fake that answers 429 beyond N requests per window, and
// is measured against the ideal time at that limit. Nights (nights.go)
// syncs the demo's tenant night after night and reports what each night
// cost and what the warehouse holds after it.
//
// It is a command's helper, not part of a run; with internal/demo it is
// one of the two production packages besides the commands that start the
// fake (extract/servicetest: the layout test's fakeImporters).
//
// Imports of sepipe's: extract, extract/servicetest, internal/demo, load, pipeline, service.
package bench
