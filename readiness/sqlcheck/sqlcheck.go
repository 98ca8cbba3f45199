package sqlcheck

import (
	"database/sql"
	"time"

	"github.com/drainkit/drainkit/readiness"
)

// DefaultTimeout is the timeout of [Ping]: it may have to open a connection,
// which takes longer than a round trip on one already open.
const DefaultTimeout = 300 * time.Millisecond

// Ping checks a database with PingContext, which opens a connection if the
// pool has none; it runs no query. The check is gating, named "sql", with
// [DefaultTimeout]. A nil db panics.
func Ping(db *sql.DB) readiness.Check {
	if db == nil {
		panic("sqlcheck: Ping: db is nil")
	}
	return readiness.Check{Name: "sql", Tier: readiness.Gating, Timeout: DefaultTimeout,
		Probe: db.PingContext}
}
