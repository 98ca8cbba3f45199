package sqlcheck_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/drainkit/drainkit/readiness/sqlcheck"
)

// A check of no database panics where it is made, naming the argument:
// its probe would otherwise panic at every probe, readiness 503 for good.
func TestPingOfNoDatabasePanics(t *testing.T) {
	assert.PanicsWithValue(t, "sqlcheck: Ping: db is nil", func() { sqlcheck.Ping(nil) })
}
