package sqlcheck_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	if err := r.Add(sqlcheck.Ping(db)); err != nil {
		t.Fatal(err)
	}
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
	if len(rep.Checks) != 1 {
		t.Fatalf("ready: got %s %q with %d checks; want the sql check's result", rep.Status, rep.Reason, len(rep.Checks))
	}
	return rep, rep.Checks[0]
}

const timedOut = "deadline exceeded"

func TestPingMariaDBUp(t *testing.T) {
	s := mariadbtest.Start(t)
	r := newRegistry(t, s.DB())
	if rep, c := probe(t, r); rep.Status != readiness.StatusOK {
		t.Fatalf("server up: got %s %+v; want ok", rep.Status, c)
	}
}

func TestPingMariaDBStoppedFailsFast(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB()
	r := newRegistry(t, db)
	if rep, c := probe(t, r); rep.Status != readiness.StatusOK {
		t.Fatalf("server up: got %s %+v; want ok", rep.Status, c)
	}
	s.Stop() // the pool's idle connection is now dead, and nothing listens
	rep, c := probe(t, r)
	if rep.Status != readiness.StatusFail {
		t.Fatalf("server stopped: got %s %+v; want fail", rep.Status, c)
	}
	// Refused, not waited out: the answer is the driver's error, well
	// before the check's own timeout.
	if strings.Contains(c.Message, timedOut) || c.Message == "" {
		t.Errorf("server stopped: message %q; want the driver's error, not a timeout", c.Message)
	}
	if strings.Contains(c.Message, mariadbtest.Password) {
		t.Errorf("server stopped: message %q carries the password", c.Message)
	}
	s.Start()
	if rep, c := probe(t, r); rep.Status != readiness.StatusOK {
		t.Errorf("server back: got %s %+v; want ok", rep.Status, c)
	}
}

func TestPingMariaDBHungTimesOut(t *testing.T) {
	s := mariadbtest.Start(t)
	db := s.DB()
	r := newRegistry(t, db)
	if rep, c := probe(t, r); rep.Status != readiness.StatusOK {
		t.Fatalf("server up: got %s %+v; want ok", rep.Status, c)
	}
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
			if rep.Status != readiness.StatusFail || !strings.Contains(c.Message, timedOut) {
				t.Errorf("server hung: got %s %q; want fail, %q", rep.Status, c.Message, timedOut)
			}
			if c.Duration > readiness.DefaultReadyTimeout {
				t.Errorf("server hung: check took %v; want at most the total budget %v", c.Duration, readiness.DefaultReadyTimeout)
			}
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
	if rep, c := probe(t, r); rep.Status != readiness.StatusOK {
		t.Fatalf("pool free: got %s %+v; want ok", rep.Status, c)
	}

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range conns {
		wg.Go(func() {
			// Cancelled at the end: the driver closes the connection.
			_, err := db.ExecContext(ctx, "SELECT SLEEP(60)")
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("slow query: %v", err)
			}
		})
	}
	waitInUse(t, db, conns)

	_, first := probe(t, r)
	if !strings.Contains(first.Message, timedOut) {
		t.Fatalf("pool exhausted: got %+v; want %q", first, timedOut)
	}
	before := runtime.NumGoroutine()
	for i := range 10 {
		rep, c := probe(t, r)
		if rep.Status != readiness.StatusFail || !strings.Contains(c.Message, timedOut) {
			t.Fatalf("probe %d: got %s %q; want fail, %q", i, rep.Status, c.Message, timedOut)
		}
	}
	// Each probe's wait for a connection ended with its context; one
	// leaked waiter per probe would show as ten more goroutines.
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Errorf("goroutines: %d before ten probes, %d after; want no growth", before, after)
	}
	if st := db.Stats(); st.WaitCount == 0 {
		t.Errorf("pool stats %+v: want pings that waited for a connection", st)
	}
}

// waitInUse waits until n connections run a query.
func waitInUse(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for db.Stats().InUse < n {
		select {
		case <-ctx.Done():
			t.Fatalf("pool: %d connections in use; want %d", db.Stats().InUse, n)
		case <-time.After(5 * time.Millisecond): // the pool notifies nobody of a connection taken
		}
	}
}
