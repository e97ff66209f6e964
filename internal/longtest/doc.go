// Package longtest is the one switch of sepipe's long tests: the
// process-killing, fault-storm, soak and multi-day cases (and a few of
// data volume), which `go test ./...` skips so that a newcomer's run of
// the suite finishes in a few minutes. SEPIPE_LONG_TESTS=1 runs them;
// .ci/run always sets it, so CI runs everything. Under -short they are
// skipped whatever the switch (CI's race-detector runs use -short).
//
// Only tests import it.
//
// Imports nothing of sepipe's.
package longtest
