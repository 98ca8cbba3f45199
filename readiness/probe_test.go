package readiness_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		require.NoError(t, err)

		assert.Equal(t, readiness.StatusOK, r.Live().Status, "live with failing dependencies")
		assert.Zero(t, db.runs.Load(), "times live ran the db check: want none")
		assert.Zero(t, stuck.runs.Load(), "times live ran the stuck check: want none")

		time.Sleep(6 * time.Second)
		rep := r.Live()
		c, _ := findCheck(rep, "outbox")
		assert.Equal(t, readiness.StatusFail, rep.Status, "stale heartbeat")
		hasPrefix(t, c.Message, "no heartbeat for 6s", "stale heartbeat")
		hb()
		assert.Equal(t, readiness.StatusOK, r.Live().Status, "after a beat")

		// Loops stop on purpose while draining: live stays 200, the stale
		// heartbeat is still listed.
		st.set(lifecycle.Draining)
		time.Sleep(6 * time.Second)
		rep = r.Live()
		_, listed := findCheck(rep, "outbox")
		assert.NotEqual(t, readiness.StatusFail, rep.Status, "draining with a stale heartbeat")
		assert.True(t, listed, "draining with a stale heartbeat: want it listed")
	})
}

func TestHeartbeatRejectsBadInput(t *testing.T) {
	r := newRegistry(t, newState(lifecycle.Running), nil)
	_, err := r.Heartbeat("loop", time.Second)
	require.NoError(t, err)
	tests := []struct {
		name    string
		give    string
		gap     time.Duration
		wantErr string
	}{
		{"empty name", "", time.Second, "name is empty"},
		{"zero gap", "x", 0, "maxGap is 0s"},
		{"duplicate", "loop", time.Second, `readiness: two heartbeats named "loop": give each its own name (readiness: duplicate name)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Heartbeat(tt.give, tt.gap)
			assert.ErrorContains(t, err, tt.wantErr, "Heartbeat(%q, %v)", tt.give, tt.gap)
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
		require.Len(t, recs, len(want), "log lines: want one per transition")
		for i, w := range want {
			rec := recs[i]
			assert.Equal(t, []any{w.old, w.new, w.level, w.failed, w.reason},
				[]any{rec["old_status"], rec["new_status"], rec["level"], rec["failed_check"], rec["reason"]},
				"line %d: old_status, new_status, level, failed_check, reason", i)
			for _, f := range []string{"service", "node_id", "old_status", "new_status", "failed_check", "reason", "duration_ms"} {
				assert.Contains(t, rec, f, "line %d: field %s missing", i, f)
			}
		}
	})
}

// A transition with two failed checks gives each one's message in reason,
// named: the second failure is not hidden behind the first.
func TestTransitionLogNamesEveryFailedCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &logs{}
		r := newRegistry(t, newState(lifecycle.Running), l)
		for _, c := range [][2]string{{"db", "dial tcp: connection refused"}, {"redis", "i/o timeout"}} { // reports keep this order
			mustAdd(t, r, readiness.Check{Name: c[0], Probe: func(context.Context) error { return errors.New(c[1]) }})
		}
		r.Ready(context.Background())
		recs := l.records(t)
		require.Len(t, recs, 1)
		assert.Equal(t, "db,redis", recs[0]["failed_check"])
		assert.Equal(t, "db: dial tcp: connection refused; redis: i/o timeout", recs[0]["reason"])
	})
}

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		r, err := readiness.New(readiness.Config{Service: "s", NodeID: "n", Logger: (&logs{}).logger(), Registerer: reg}, newState(lifecycle.Running).State)
		require.NoError(t, err)
		defer r.Close(context.Background())
		db, cache := &counter{}, &counter{err: errors.New("down")}
		mustAdd(t, r,
			readiness.Check{Name: "db", Probe: db.probe},
			readiness.Check{Name: "cache", Tier: readiness.Informational, Probe: cache.probe})
		r.Ready(t.Context())
		r.Live()

		_, err = reg.Gather() // a scrape
		require.NoError(t, err)
		assert.Equal(t, int32(1), db.runs.Load(), "db runs after a probe and a scrape: a scrape runs nothing")
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
			got, found := metricValue(t, reg, tt.name, tt.labels)
			assert.True(t, found, "%s{%s} not gathered", tt.name, tt.labels)
			assert.Equal(t, tt.want, got, "%s{%s}", tt.name, tt.labels)
		}
	})
}

// metricValue returns a gauge's or counter's value, or a histogram's sample
// count, for the series whose labels read like "check=db,tier=gating".
func metricValue(t *testing.T, reg *prometheus.Registry, name, labels string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
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
		// A password may hold '/', '@' and quotes: the userinfo ends at the last '@'.
		{"dial app:s3/cret@tcp(db:3306)/rooms: refused", "dial ***@tcp(db:3306)/rooms: refused"},
		{"dial app:s3@cret@tcp(db:3306)/rooms: refused", "dial ***@tcp(db:3306)/rooms: refused"},
		{`dial app:s3"cret@tcp(db:3306)/rooms: refused`, "dial ***@tcp(db:3306)/rooms: refused"},
		{`parse "redis://default:s3/cret@cache:6379/0": invalid port`, `parse "redis://***@cache:6379/0": invalid port`},
		{"(app:s3cret@tcp(db)/rooms)", "(***@tcp(db)/rooms)"},
		{"host=db user=app password=s3;cret,x dbname=rooms", "host=db user=app password=*** dbname=rooms"},
		{"mail alice@example.com bounced", "mail alice@example.com bounced"}, // no ':' before the '@': no password
		{"env DB_PASSWORD=s3cret is set", "env DB_PASSWORD=*** is set"},
		{`body {"user":"app","password":"s3cret"}`, `body {"user":"app","password":***`},
		// A key at the end of a longer name, and JSON quoted once more by %q.
		{"PGPASSWORD=s3cret rejected", "PGPASSWORD=*** rejected"},
		{"dial tcp compass:6379: connect: refused", "dial tcp compass:6379: connect: refused"}, // a host, not a pass
		{"env DB_PASS=s3cret", "env DB_PASS=***"},
		{fmt.Sprintf("auth: unexpected reply to %q", `{"user":"app","password":"s3cret"}`), `auth: unexpected reply to "{\"user\":\"app\",\"password\":***`},
		{strings.Repeat("é", 200), strings.Repeat("é", 80) + "…"},
		// MySQL says whether a password was sent, which helps and is no secret.
		{"Error 1045: Access denied for user 'app'@'10.0.0.2' (using password: YES)", "Error 1045: Access denied for user 'app'@'10.0.0.2' (using password: YES)"},
		{"(using password: NO)", "(using password: NO)"},
		{"(using password: s3cret)", "(using password: ***"},
	}
	for _, tt := range tests {
		got := readiness.Redact(tt.give)
		assert.Equal(t, tt.want, got, "Redact(%q)", tt.give)
		assert.NotContains(t, got, "s3cret", "Redact(%q) kept the secret", tt.give)
	}
}

func TestCheckMessagesAreRedacted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), nil)
		mustAdd(t, r, readiness.Check{Name: "db", Probe: func(context.Context) error {
			return errors.New("dial app:s3cret@tcp(db:3306)/rooms?password=s3cret: refused")
		}})
		c, _ := findCheck(r.Ready(t.Context()), "db")
		assert.NotContains(t, c.Message, "s3cret", "message contains the password; want it stripped")
	})
}
