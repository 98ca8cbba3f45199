package sqlcheck_test

import (
	"testing"

	"go.uber.org/goleak"
)

// sql.Open starts the pool's connection opener; db.Close must stop it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
