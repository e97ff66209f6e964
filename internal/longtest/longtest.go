package longtest

import (
	"os"
	"testing"
)

// Env is the switch: set to 1, the long tests run.
const Env = "SEPIPE_LONG_TESTS"

// Enabled reports whether the long tests run: Env is set to 1 and the
// tests do not run under -short.
func Enabled() bool { return os.Getenv(Env) == "1" && !testing.Short() }

// Skip skips t, a long test (what makes it long: why), unless Enabled.
func Skip(t testing.TB, why string) {
	t.Helper()
	if !Enabled() {
		t.Skipf("a long test (%s): set %s=1 to run it; .ci/run does", why, Env)
	}
}
