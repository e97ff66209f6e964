//go:build race

package webhooks_test

// raceEnabled: the race detector is on, and a process's memory is several
// times what it is without it, so memory bounds are not asserted.
const raceEnabled = true
