package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain makes the test binary three programs: the tests; the service
// under drill when DRILL_TEST_SERVICE names a behaviour (the drill runs
// os.Args[0] with it in -env); and the drainkit command itself when
// DRILL_TEST_MAIN is set, for the test that kills it.
func TestMain(m *testing.M) {
	if mode := os.Getenv("DRILL_TEST_SERVICE"); mode != "" {
		os.Exit(testService(mode))
	}
	if os.Getenv("DRILL_TEST_MAIN") != "" {
		os.Args = append([]string{os.Args[0]}, drillArgsFromEnv()...)
		main()
	}
	goleak.VerifyTestMain(m)
}
