package redischeck_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests start a redis-server and a client whose pool runs goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
