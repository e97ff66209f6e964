//go:build !race

package webhooks_test

// raceEnabled: the race detector is off (race_test.go).
const raceEnabled = false
