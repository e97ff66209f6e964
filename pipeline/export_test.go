package pipeline

// Every test of the package syncs with the early load on, whatever the
// machine is doing, and with part files small enough that a test tenant
// fills several: the early load and the commit after it are the path
// every test exercises (earlyload_test.go tests the ways back).
func init() {
	partFileRows = 150
	loadEarlyAlways = true
}
