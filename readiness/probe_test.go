package readiness_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

func TestLivenessIgnoresDependencies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newState(lifecycle.Running)
		r := newRegistry(t, st, nil)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		db, stuck := &counter{err: errors.New("connection refused")}, &counter{}
		mustAdd(t, r,
			readiness.Check{Name: "db", Probe: db.probe},
			readiness.Check{Name: "stuck", Probe: hung(stuck, release)})
		hb, err := r.Heartbeat("outbox", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}

		if rep := r.Live(); rep.Status != readiness.StatusOK {
			t.Errorf("live with failing dependencies: got %s; want ok", rep.Status)
		}
		if db.runs.Load() != 0 || stuck.runs.Load() != 0 {
			t.Errorf("live ran dependency checks (db %d, stuck %d times); want none", db.runs.Load(), stuck.runs.Load())
		}

		time.Sleep(6 * time.Second)
		rep := r.Live()
		if c, _ := findCheck(rep, "outbox"); rep.Status != readiness.StatusFail || !strings.HasPrefix(c.Message, "no heartbeat for 6s") {
			t.Errorf("stale heartbeat: got %s %q; want fail \"no heartbeat for 6s…\"", rep.Status, c.Message)
		}
		hb()
		if rep := r.Live(); rep.Status != readiness.StatusOK {
			t.Errorf("after Beat: got %s; want ok", rep.Status)
		}

		// Loops stop on purpose while draining: live stays 200, the stale
		// heartbeat is still listed.
		st.set(lifecycle.Draining)
		time.Sleep(6 * time.Second)
		rep = r.Live()
		if _, listed := findCheck(rep, "outbox"); rep.Status == readiness.StatusFail || !listed {
			t.Errorf("draining with stale heartbeat: got %s (listed %v); want not fail, listed", rep.Status, listed)
		}
	})
}

func TestHeartbeatRejectsBadInput(t *testing.T) {
	r := newRegistry(t, newState(lifecycle.Running), nil)
	if _, err := r.Heartbeat("loop", time.Second); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		give    string
		gap     time.Duration
		wantErr string
	}{
		{"empty name", "", time.Second, "name is empty"},
		{"zero gap", "x", 0, "maxGap is 0s"},
		{"duplicate", "loop", time.Second, "duplicate name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := r.Heartbeat(tt.give, tt.gap); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Heartbeat(%q, %v) = %v; want error containing %q", tt.give, tt.gap, err, tt.wantErr)
			}
		})
	}
}

// TestTransitionLogs walks readiness through its states with 1,000
// concurrent probes at each step: one log line per change, none per probe.
func TestTransitionLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newState(lifecycle.Starting)
		l := &logs{}
		r := newRegistry(t, st, l)
		db := &counter{}
		var dbErr error
		var mu sync.Mutex
		mustAdd(t, r, readiness.Check{Name: "db", Probe: func(ctx context.Context) error {
			db.probe(ctx)
			mu.Lock()
			defer mu.Unlock()
			return dbErr
		}})
		setErr := func(err error) { mu.Lock(); dbErr = err; mu.Unlock() }
		stampede := func() {
			var wg sync.WaitGroup
			for range 1000 {
				wg.Go(func() { r.Ready(context.Background()) })
			}
			wg.Wait()
			time.Sleep(2 * readiness.DefaultCacheTTL)
		}

		stampede() // unknown → fail (starting)
		st.set(lifecycle.Running)
		stampede() // fail → ok
		stampede() // no change
		setErr(errors.New("dial tcp: connection refused"))
		stampede() // stale ok answered while refreshing: may or may not change yet
		stampede() // ok → fail
		setErr(nil)
		stampede()
		stampede() // fail → ok
		st.set(lifecycle.Draining)
		stampede() // ok → fail (draining)
		stampede() // no change

		want := []struct{ old, new, level, failed, reason string }{
			{"unknown", "fail", "INFO", "", "starting"},
			{"fail", "ok", "INFO", "", ""},
			{"ok", "fail", "ERROR", "db", "dial tcp: connection refused"},
			{"fail", "ok", "INFO", "", ""},
			{"ok", "fail", "INFO", "", "draining"},
		}
		recs := l.records(t)
		if len(recs) != len(want) {
			t.Fatalf("got %d log lines; want %d (one per transition): %v", len(recs), len(want), recs)
		}
		for i, w := range want {
			rec := recs[i]
			got := []any{rec["old_status"], rec["new_status"], rec["level"], rec["failed_check"], rec["reason"]}
			if got[0] != w.old || got[1] != w.new || got[2] != w.level || got[3] != w.failed || got[4] != w.reason {
				t.Errorf("line %d: got old=%v new=%v level=%v failed_check=%v reason=%v; want %+v", i, got[0], got[1], got[2], got[3], got[4], w)
			}
			for _, f := range []string{"service", "node_id", "old_status", "new_status", "failed_check", "reason", "duration_ms"} {
				if _, ok := rec[f]; !ok {
					t.Errorf("line %d: field %s missing: %v", i, f, rec)
				}
			}
		}
	})
}

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		r, err := readiness.New(readiness.Config{Service: "s", NodeID: "n", Logger: (&logs{}).logger(), Registerer: reg}, newState(lifecycle.Running).State)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(context.Background())
		db, cache := &counter{}, &counter{err: errors.New("down")}
		mustAdd(t, r,
			readiness.Check{Name: "db", Probe: db.probe},
			readiness.Check{Name: "cache", Tier: readiness.Informational, Probe: cache.probe})
		r.Ready(t.Context())
		r.Live()

		if _, err := reg.Gather(); err != nil { // a scrape
			t.Fatal(err)
		}
		if db.runs.Load() != 1 {
			t.Errorf("db ran %d times after a probe and a scrape; want 1 (a scrape runs nothing)", db.runs.Load())
		}
		tests := []struct {
			name   string
			labels string
			want   float64
		}{
			{"health_ready_status", "", 1},
			{"health_live_status", "", 1},
			{"health_dependency_failures_total", "check=cache,tier=informational", 1},
			{"health_dependency_failures_total", "check=db,tier=gating", 0},
			{"health_check_duration_ms", "check=db", 1}, // sample count
			{"health_check_duration_ms", "check=cache", 1},
		}
		for _, tt := range tests {
			if got, ok := metricValue(t, reg, tt.name, tt.labels); !ok || got != tt.want {
				t.Errorf("%s{%s} = %v (found %v); want %v", tt.name, tt.labels, got, ok, tt.want)
			}
		}
	})
}

// metricValue returns a gauge's or counter's value, or a histogram's sample
// count, for the series whose labels read like "check=db,tier=gating".
func metricValue(t *testing.T, reg *prometheus.Registry, name, labels string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			if strings.Join(ls, ",") != labels {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func TestRedact(t *testing.T) {
	tests := []struct {
		give, want string
	}{
		{"dial redis://user:s3cret@10.0.0.1:6379/0: refused", "dial redis://***@10.0.0.1:6379/0: refused"},
		{"redis://:s3cret@cache:6379", "redis://***@cache:6379"},
		{"open app:s3cret@tcp(db:3306)/rooms: bad", "open ***@tcp(db:3306)/rooms: bad"},
		{"host=db user=app password=s3cret dbname=rooms", "host=db user=app password=*** dbname=rooms"},
		{"postgres://db/rooms?sslmode=off&password=s3cret", "postgres://db/rooms?sslmode=off&password=***"},
		{"dial tcp 10.0.0.1:6379: connect: connection refused", "dial tcp 10.0.0.1:6379: connect: connection refused"},
		{strings.Repeat("é", 200), strings.Repeat("é", 80) + "…"},
	}
	for _, tt := range tests {
		if got := readiness.Redact(tt.give); got != tt.want {
			t.Errorf("Redact(%q) = %q; want %q", tt.give, got, tt.want)
		}
		if strings.Contains(readiness.Redact(tt.give), "s3cret") {
			t.Errorf("Redact(%q) kept the secret", tt.give)
		}
	}
}

func TestCheckMessagesAreRedacted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), nil)
		mustAdd(t, r, readiness.Check{Name: "db", Probe: func(context.Context) error {
			return errors.New("dial app:s3cret@tcp(db:3306)/rooms?password=s3cret: refused")
		}})
		rep := r.Ready(t.Context())
		if c, _ := findCheck(rep, "db"); strings.Contains(c.Message, "s3cret") {
			t.Errorf("message %q contains the password; want it stripped", c.Message)
		}
	})
}
