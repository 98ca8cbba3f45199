package sqlcheck_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/mariadbtest"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/sqlcheck"
)

// These tests run Ping against a real MariaDB through go-sql-driver/mysql
// (a test-only dependency: the package links only database/sql), in the
// failures a readiness check of a database exists for.

// newRegistry is a registry with the one check, whose every probe runs it
// again (CacheTTL of a nanosecond) under the default total budget.
func newRegistry(t *testing.T, db *sql.DB) *readiness.Registry {
	t.Helper()
	r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1",
		CacheTTL: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)}, running{}.State)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	require.NoError(t, r.Add(sqlcheck.Ping(db)))
	return r
}

// probe answers one ready probe. Its context outlasts the registry's total
// budget by far, so a report with check results proves the evaluation ended
// by its own deadline, not by the caller giving up.
func probe(t *testing.T, r *readiness.Registry) (readiness.Report, readiness.CheckResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), readiness.DefaultReadyTimeout+5*time.Second)
	defer cancel()
	rep := r.Ready(ctx)
	require.Len(t, rep.Checks, 1, "ready: got %s %q; want the sql check's result", rep.Status, rep.Reason)
	return rep, rep.Checks[0]
}

const timedOut = "deadline exceeded"

func TestPingMariaDBUp(t *testing.T) {
	s := mariadbtest.Start(t)
	r := newRegistry(t, s.DB())
	rep, c := probe(t, r)
	require.Equal(t, readiness.StatusOK, rep.Status, "server up (%+v)", c)
}

func TestPingMariaDBStoppedFailsFast(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB()
	r := newRegistry(t, db)
	rep, c := probe(t, r)
	require.Equal(t, readiness.StatusOK, rep.Status, "server up (%+v)", c)
	s.Stop() // the pool's idle connection is now dead, and nothing listens
	rep, c = probe(t, r)
	require.Equal(t, readiness.StatusFail, rep.Status, "server stopped (%+v)", c)
	// Refused, not waited out: the answer is the driver's error, well
	// before the check's own timeout.
	assert.NotEmpty(t, c.Message, "server stopped: message; want the driver's error")
	assert.NotContains(t, c.Message, timedOut, "server stopped: message; want the driver's error, not a timeout")
	assert.NotContains(t, c.Message, mariadbtest.Password, "server stopped: message carries the password")
	s.Start()
	rep, c = probe(t, r)
	assert.Equal(t, readiness.StatusOK, rep.Status, "server back (%+v)", c)
}

// A hung server (SIGSTOP): the probe times out, and probing it again and
// again leaves no goroutine behind.
func TestPingMariaDBHungTimesOut(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB()
	r := newRegistry(t, db)
	rep, c := probe(t, r)
	require.Equal(t, readiness.StatusOK, rep.Status, "server up (%+v)", c)
	s.Pause()
	defer s.Resume()
	tests := []struct {
		name string
		idle int // connections the pool keeps: 1 pings on the open one, 0 dials a new one
	}{
		{"open connection", 2},
		{"new connection", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db.SetMaxIdleConns(tt.idle)
			rep, c := probe(t, r)
			assert.Equal(t, readiness.StatusFail, rep.Status, "server hung (message %q)", c.Message)
			assert.Contains(t, c.Message, timedOut, "server hung")
			assert.LessOrEqual(t, c.Duration, readiness.DefaultReadyTimeout, "server hung: check duration; want at most the total budget")
			// Each probe's dial or query ends with its context. The last
			// one's goroutines end just after its answer: polled for, a
			// goroutine left per probe would still show as ten more.
			before := runtime.NumGoroutine()
			for i := range 10 {
				rep, c := probe(t, r)
				require.Equal(t, readiness.StatusFail, rep.Status, "probe %d (message %q)", i, c.Message)
				require.Contains(t, c.Message, timedOut, "probe %d", i)
			}
			assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+2 }, time.Second, 10*time.Millisecond,
				"goroutines after ten probes of a hung server (%d before); want no growth", before)
		})
	}
}

// A pool whose every connection is busy with a slow query: PingContext
// waits for a free connection, and must give up at the check's timeout
// instead of the pool's wait (the incident: a health check that hung for
// the pool's 60 s acquire timeout). Repeated probes must not pile up
// goroutines waiting on the pool.
func TestPingMariaDBPoolExhausted(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB()
	const conns = 2
	db.SetMaxOpenConns(conns)
	r := newRegistry(t, db)
	rep, c := probe(t, r)
	require.Equal(t, readiness.StatusOK, rep.Status, "pool free (%+v)", c)

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range conns {
		wg.Go(func() {
			// Cancelled at the end: the driver closes the connection.
			_, err := db.ExecContext(ctx, "SELECT SLEEP(60)")
			if !errors.Is(err, context.Canceled) {
				assert.NoError(t, err, "slow query") // a goroutine: assert, never require
			}
		})
	}
	waitInUse(t, db, conns)

	_, first := probe(t, r)
	require.Contains(t, first.Message, timedOut, "pool exhausted (%+v)", first)
	before := runtime.NumGoroutine()
	for i := range 10 {
		rep, c := probe(t, r)
		require.Equal(t, readiness.StatusFail, rep.Status, "probe %d (message %q)", i, c.Message)
		require.Contains(t, c.Message, timedOut, "probe %d", i)
	}
	// Each probe's wait for a connection ended with its context; one
	// leaked waiter per probe would show as ten more goroutines.
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2, "goroutines after ten probes (%d before); want no growth", before)
	st := db.Stats()
	assert.NotZero(t, st.WaitCount, "pool stats %+v: want pings that waited for a connection", st)
}

// waitInUse waits until n connections run a query.
func waitInUse(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for db.Stats().InUse < n {
		select {
		case <-ctx.Done():
			require.FailNowf(t, "pool: too few connections in use", "%d in use; want %d", db.Stats().InUse, n)
		case <-time.After(5 * time.Millisecond): // the pool notifies nobody of a connection taken
		}
	}
}
