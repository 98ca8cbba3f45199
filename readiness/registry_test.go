package readiness_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

func TestConfigValidate(t *testing.T) {
	ok := readiness.Config{Service: "room-service", NodeID: "room-1"}
	tests := []struct {
		name    string
		give    func(c *readiness.Config)
		wantErr string // substring; empty means valid
	}{
		{"defaults", func(*readiness.Config) {}, ""},
		{"no service", func(c *readiness.Config) { c.Service = "" }, "Config.Service"},
		{"no node", func(c *readiness.Config) { c.NodeID = "" }, "Config.NodeID"},
		{"negative ready timeout", func(c *readiness.Config) { c.ReadyTimeout = -time.Second }, "Config.ReadyTimeout is -1s"},
		{"negative ttl", func(c *readiness.Config) { c.CacheTTL = -1 }, "Config.CacheTTL"},
		{"negative check timeout", func(c *readiness.Config) { c.CheckTimeout = -1 }, "Config.CheckTimeout"},
		{"check timeout above total", func(c *readiness.Config) { c.CheckTimeout = time.Second }, "CheckTimeout 1s exceeds ReadyTimeout 500ms"},
		{"short total lowers the default check timeout", func(c *readiness.Config) { c.ReadyTimeout = 200 * time.Millisecond }, ""},
		{"explicit values", func(c *readiness.Config) { c.ReadyTimeout, c.CheckTimeout = 2*time.Second, time.Second }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.give(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				assert.NoError(t, err, "Validate()")
				return
			}
			assert.ErrorContains(t, err, tt.wantErr, "Validate()")
			assert.ErrorIs(t, err, lifecycle.ErrConfig, "Validate(): a configuration error (fxmodule.Run exits 78)")
		})
	}
	_, err := readiness.New(ok, nil)
	assert.ErrorIs(t, err, lifecycle.ErrConfig, "New(cfg, nil): want a configuration error for the missing state source")
}

// A Registerer that already has the registry's metrics is refused by New
// naming the field and the metric, as a configuration error, and the
// refused New leaves none of its own metrics registered.
func TestNewRefusesMetricsAlreadyRegistered(t *testing.T) {
	prom := prometheus.NewRegistry()
	cfg := readiness.Config{Service: "room-service", NodeID: "room-1", Registerer: prom}
	first, err := readiness.New(cfg, newState(lifecycle.Running).State)
	require.NoError(t, err)
	_, err = readiness.New(cfg, newState(lifecycle.Running).State)
	assert.EqualError(t, err, `readiness: Config.Registerer: metric "health_ready_status": duplicate metrics collector registration attempted`)
	assert.ErrorIs(t, err, lifecycle.ErrConfig, "fxmodule.Run exits 78 on it")

	taken := prometheus.NewRegistry()
	require.NoError(t, taken.Register(prometheus.NewGauge(prometheus.GaugeOpts{Name: "health_check_duration_ms", Help: "someone else's"})))
	cfg.Registerer = taken
	_, err = readiness.New(cfg, newState(lifecycle.Running).State)
	assert.ErrorContains(t, err, `readiness: Config.Registerer: metric "health_check_duration_ms": `)
	families, err := taken.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1, "metrics registered after a refused New")
	assert.Equal(t, "health_check_duration_ms", families[0].GetName(), "the one metric left: someone else's")
	require.NoError(t, first.Close(context.Background()))
}

func TestAddRejectsBadChecks(t *testing.T) {
	r := newRegistry(t, newState(lifecycle.Running), nil)
	mustAdd(t, r, readiness.Check{Name: "db", Probe: (&counter{}).probe})
	probe := (&counter{}).probe
	tests := []struct {
		name    string
		give    readiness.Check
		wantErr string
	}{
		{"duplicate", readiness.Check{Name: "db", Probe: probe}, `readiness: two checks named "db": give each its own name (readiness: duplicate name)`},
		{"empty name", readiness.Check{Probe: probe}, "name is empty"},
		{"nil probe", readiness.Check{Name: "x"}, `check "x": Probe is nil`},
		{"negative timeout", readiness.Check{Name: "x", Probe: probe, Timeout: -time.Millisecond}, "Timeout is -1ms"},
		{"bad tier", readiness.Check{Name: "x", Probe: probe, Tier: 7}, "Tier is tier(7)"},
		// A metric label must be UTF-8: refused here, not by a panic later.
		{"name not UTF-8", readiness.Check{Name: "db\xff", Probe: probe}, `check "db\xff": Name is not valid UTF-8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorContains(t, r.Add(tt.give), tt.wantErr, "Add()")
		})
	}
	assert.ErrorIs(t, r.Add(readiness.Check{Name: "db", Probe: probe}), readiness.ErrDuplicate, "Add(duplicate)")
	var names []string
	for _, c := range r.Ready(t.Context()).Checks {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"db"}, names, "checks after the refused Adds: none of them may be added")
}

func TestReadyStatus(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name       string
		gating     error
		info       error
		wantStatus string
		wantFailed []string
	}{
		{"all ok", nil, nil, readiness.StatusOK, nil},
		{"gating fails", boom, nil, readiness.StatusFail, []string{"db"}},
		{"informational fails", nil, boom, readiness.StatusDegraded, []string{"cache"}},
		{"both fail", boom, boom, readiness.StatusFail, []string{"db", "cache"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRegistry(t, newState(lifecycle.Running), nil)
				mustAdd(t, r,
					readiness.Check{Name: "db", Probe: (&counter{err: tt.gating}).probe},
					readiness.Check{Name: "cache", Tier: readiness.Informational, Probe: (&counter{err: tt.info}).probe})
				rep := r.Ready(t.Context())
				assert.Equal(t, tt.wantStatus, rep.Status, "Status")
				assert.Equal(t, tt.wantFailed, rep.Failed(), "Failed()")
				for _, name := range tt.wantFailed {
					c, _ := findCheck(rep, name)
					assert.Equal(t, "boom", c.Message, "check %s message", name)
				}
			})
		})
	}
}

// hung returns a probe that ignores its context until release is closed,
// counting how often it was started.
func hung(started *counter, release <-chan struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		started.probe(ctx)
		<-release
		return nil
	}
}

func TestHungCheckIsBoundedAndNotRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), nil)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) }) // runs before the registry's Close
		stuck, healthy := &counter{}, &counter{}
		mustAdd(t, r,
			readiness.Check{Name: "stuck", Probe: hung(stuck, release)},
			readiness.Check{Name: "healthy", Probe: healthy.probe})

		for i := range 10 {
			start := time.Now()
			rep := r.Ready(t.Context())
			require.LessOrEqual(t, time.Since(start), readiness.DefaultReadyTimeout, "probe %d took", i)
			c, _ := findCheck(rep, "stuck")
			assert.Equal(t, readiness.StatusFail, c.Status, "probe %d: stuck", i)
			hasPrefix(t, c.Message, "deadline exceeded", "probe %d: stuck", i)
			h, _ := findCheck(rep, "healthy")
			assert.Equal(t, readiness.StatusOK, h.Status, "probe %d: healthy (%q): a hung check must not mask it", i, h.Message)
			time.Sleep(2 * readiness.DefaultCacheTTL) // fake time: expire the cache
		}
		assert.Equal(t, int32(1), stuck.runs.Load(), "times the hung check started")
		assert.Equal(t, int32(10), healthy.runs.Load(), "times the healthy check ran: one per evaluation")
		rep := r.Ready(t.Context())
		c, _ := findCheck(rep, "stuck")
		assert.Contains(t, c.Message, "running 2", "stuck message: want its age, about 20s") // started ~20s of fake time ago
	})
}

func TestCheckTimeoutCappedByReadyTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), nil)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		mustAdd(t, r, readiness.Check{Name: "slow", Timeout: 5 * time.Second, Probe: hung(&counter{}, release)})
		start := time.Now()
		r.Ready(t.Context())
		assert.Equal(t, readiness.DefaultReadyTimeout, time.Since(start), "probe took: want the whole-evaluation deadline")
	})
}

func TestPanickingCheckFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), nil)
		mustAdd(t, r, readiness.Check{Name: "bad", Probe: func(context.Context) error { panic("boom") }})
		rep := r.Ready(t.Context())
		c, _ := findCheck(rep, "bad")
		assert.Equal(t, readiness.StatusFail, rep.Status)
		assert.Equal(t, "panic: boom", c.Message)
	})
}

func TestStateAnswersWithoutChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newState(lifecycle.Starting)
		r := newRegistry(t, st, nil)
		db := &counter{}
		mustAdd(t, r, readiness.Check{Name: "db", Probe: db.probe})

		rep := r.Ready(t.Context())
		assert.Equal(t, readiness.StatusFail, rep.Status, "starting")
		assert.Equal(t, "starting", rep.Reason, "starting")
		assert.Equal(t, lifecycle.Starting, rep.State, "starting")
		st.set(lifecycle.Running)
		rep = r.Ready(t.Context())
		assert.Equal(t, readiness.StatusOK, rep.Status, "running")
		assert.Equal(t, lifecycle.Running, rep.State, "running")
		// The cached "ok" is fresh, yet the first probe after the flip fails.
		st.set(lifecycle.Draining)
		rep = r.Ready(t.Context())
		assert.Equal(t, readiness.StatusFail, rep.Status, "draining")
		assert.Equal(t, "draining", rep.Reason, "draining")
		assert.Equal(t, lifecycle.Draining, rep.State, "draining")
		time.Sleep(2 * readiness.DefaultCacheTTL)
		r.Ready(t.Context())
		assert.Equal(t, int32(1), db.runs.Load(), "check runs: only while running")
	})
}

// TestStampede runs 1,000 concurrent probes every 100 ms of fake time for
// 3 s against a 50 ms check: it runs once per TTL window, and apart from the
// very first evaluation no probe waits for it.
func TestStampede(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), nil)
		slow := &counter{}
		mustAdd(t, r, readiness.Check{Name: "slow", Probe: func(ctx context.Context) error {
			slow.probe(ctx)
			time.Sleep(50 * time.Millisecond)
			return nil
		}})
		const probes = 1000
		var waited [31]int
		for step := range waited {
			results := make(chan time.Duration, probes)
			for range probes {
				go func() {
					start := time.Now()
					assert.Equal(t, readiness.StatusOK, r.Ready(context.Background()).Status, "step %d: status", step)
					results <- time.Since(start)
				}()
			}
			for range probes {
				if <-results > 0 {
					waited[step]++
				}
			}
			time.Sleep(100*time.Millisecond - time.Since(time.Now().Truncate(100*time.Millisecond)))
		}
		// Refreshes start at 0, 1.1 s and 2.2 s: each lands 50 ms later and is
		// fresh for 1 s; meanwhile probes answer from the one before.
		assert.Equal(t, int32(3), slow.runs.Load(), "check runs in 3 s: once per TTL window")
		want := map[int]int{0: probes}
		for step, got := range waited {
			assert.Equal(t, want[step], got, "step %d: probes that waited", step)
		}
	})
}

func TestDisconnectedProberDoesNotCancelEvaluation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), nil)
		var sawCancel bool
		check := &counter{}
		mustAdd(t, r, readiness.Check{Name: "db", Probe: func(ctx context.Context) error {
			check.probe(ctx)
			time.Sleep(100 * time.Millisecond)
			sawCancel = ctx.Err() != nil
			return nil
		}})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		assert.Equal(t, readiness.StatusFail, r.Ready(ctx).Status, "abandoned probe: nothing to answer from yet")
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		assert.False(t, sawCancel, "check saw its context cancelled when the first prober left; want the evaluation to go on")
		assert.Equal(t, readiness.StatusOK, r.Ready(t.Context()).Status, "next probe: want ok from the evaluation the first prober started")
		assert.Equal(t, int32(1), check.runs.Load(), "check runs")
	})
}

func TestCloseWaitsForChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := readiness.New(readiness.Config{Service: "s", NodeID: "n", Logger: (&logs{}).logger()}, newState(lifecycle.Running).State)
		require.NoError(t, err)
		release := make(chan struct{})
		mustAdd(t, r, readiness.Check{Name: "stuck", Probe: hung(&counter{}, release)})
		r.Ready(t.Context())
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err = r.Close(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "Close with a hung check: want the context's error")
		assert.ErrorContains(t, err, "stuck (running", "Close with a hung check: want the check named")
		close(release)
		assert.NoError(t, r.Close(t.Context()), "Close after release")
		rep := r.Ready(t.Context())
		assert.Equal(t, readiness.StatusFail, rep.Status, "after Close")
		assert.Equal(t, "stopped", rep.Reason, "after Close")
		assert.ErrorIs(t, r.Add(readiness.Check{Name: "x", Probe: (&counter{}).probe}), readiness.ErrClosed, "Add after Close")
	})
}

// A result cached before Close must not answer a probe after it: the
// process may still be Running (the drain closes readiness in its last
// phase), but its checks can no longer run.
func TestClosedRegistryAnswersStoppedFromCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := readiness.New(readiness.Config{Service: "s", NodeID: "n", Logger: (&logs{}).logger()}, newState(lifecycle.Running).State)
		require.NoError(t, err)
		c := &counter{}
		mustAdd(t, r, readiness.Check{Name: "db", Tier: readiness.Gating, Probe: c.probe})
		require.Equal(t, readiness.StatusOK, r.Ready(t.Context()).Status, "before Close")
		require.NoError(t, r.Close(t.Context()))
		runs := c.runs.Load()
		for range 3 { // within the cache's TTL and after it
			rep := r.Ready(t.Context())
			assert.Equal(t, readiness.StatusFail, rep.Status, "after Close")
			assert.Equal(t, "stopped", rep.Reason, "after Close")
			assert.Equal(t, lifecycle.Stopped, rep.State, "after Close: the state a reader acts on, whatever the process's")
			time.Sleep(time.Second) // synctest: advances the fake clock past CacheTTL
		}
		assert.Zero(t, c.runs.Load()-runs, "checks run after Close")
	})
}

// A check's context ends by its own timeout (or Close), never because the
// evaluation that started it stopped waiting: a probe that joins the
// execution must read a timeout, not "canceled" (a driver returns the
// context's error, as database/sql does for a pool wait).
func TestTimedOutCheckReadsDeadlineExceeded(t *testing.T) {
	// CacheTTL of a nanosecond: every probe evaluates again.
	r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1",
		CacheTTL: time.Nanosecond, Logger: (&logs{}).logger()}, newState(lifecycle.Running).State)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	const probes = 20
	// One result per run of the check, and not one per probe: a probe can
	// join the run of the probe before it, which has returned from Probe
	// but not yet been marked finished, and then starts none.
	var runs atomic.Int32
	done := make(chan error, probes)
	mustAdd(t, r, readiness.Check{Name: "pool", Timeout: 20 * time.Millisecond, Probe: func(ctx context.Context) error {
		runs.Add(1)
		<-ctx.Done()
		done <- ctx.Err()
		return ctx.Err()
	}})
	// Real time, not synctest: the race is one of real scheduling, the
	// evaluation's return against the check's own timer.
	for range probes {
		c, _ := findCheck(r.Ready(t.Context()), "pool")
		hasPrefix(t, c.Message, "deadline exceeded", "pool (%s)", c.Status)
	}
	// Every run that began ends by its own 20 ms timeout and reports.
	n := int(runs.Load())
	require.NotZero(t, n, "the check never ran")
	errs := make([]error, n)
	for i := range errs {
		errs[i] = <-done
	}
	for i, err := range errs {
		assert.ErrorIs(t, err, context.DeadlineExceeded, "run %d: the check's context ended with", i)
	}
}

// TestFailingResultsKeptForAFifth: an evaluation in which a gating check
// failed answers probes for CacheTTL/5, so a recovery is seen within 200 ms
// of it; a passing one, or one where only an informational check failed,
// for the whole CacheTTL. Probes come every 10 ms for 2 s of fake time.
func TestFailingResultsKeptForAFifth(t *testing.T) {
	tests := []struct {
		name     string
		tier     readiness.Tier
		err      error
		wantRuns int32
	}{
		{name: "gating failing", tier: readiness.Gating, err: errors.New("refused"), wantRuns: 10},
		{name: "gating ok", tier: readiness.Gating, wantRuns: 2},
		{name: "informational failing", tier: readiness.Informational, err: errors.New("refused"), wantRuns: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRegistry(t, newState(lifecycle.Running), nil)
				c := &counter{err: tt.err}
				mustAdd(t, r, readiness.Check{Name: "dep", Tier: tt.tier, Probe: c.probe})
				for range 200 {
					r.Ready(context.Background())
					synctest.Wait() // a refresh a probe started lands before the next probe
					time.Sleep(10 * time.Millisecond)
				}
				assert.Equal(t, tt.wantRuns, c.runs.Load(), "check runs in 2 s")
			})
		})
	}
}

// A Registry not made by New has no service, node or lifecycle state to
// answer from: every method fails, saying so, and none panics.
func TestZeroRegistryFailsSayingSo(t *testing.T) {
	const want = "readiness: Registry not made by New"
	var r readiness.Registry
	errs := []struct {
		name string
		give func() error
	}{
		{"Add", func() error { return r.Add(readiness.Check{Name: "db", Probe: (&counter{}).probe}) }},
		{"Heartbeat", func() error { _, err := r.Heartbeat("loop", time.Second); return err }},
		{"Close", func() error { return r.Close(t.Context()) }},
	}
	for _, tt := range errs {
		assert.EqualError(t, tt.give(), want, tt.name)
	}
	reports := []struct {
		name string
		give func() readiness.Report
	}{
		{"Ready", func() readiness.Report { return r.Ready(t.Context()) }},
		{"Live", r.Live},
	}
	for _, tt := range reports {
		rep := tt.give()
		assert.Equal(t, readiness.StatusFail, rep.Status, "%s: Status", tt.name)
		assert.Equal(t, want, rep.Reason, "%s: Reason", tt.name)
	}
	rec := httptest.NewRecorder()
	r.ReadyHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, readiness.ReadyPath, nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "ready handler: status code")
	r.OnTransition(lifecycle.Transition{To: lifecycle.Running}) // no-op, no panic
}

// Close's doc: from Close on, ready probes answer fail with reason
// "stopped" (State Stopped). A registry closed while the process still
// started (a start aborted before the flip) answered "starting", and the
// gRPC health bridge, which latches NOT_SERVING only on Draining or
// Stopped, stayed UNKNOWN.
func TestAClosedRegistryAnswersStoppedInEveryState(t *testing.T) {
	for _, st := range []lifecycle.State{lifecycle.Starting, lifecycle.Running, lifecycle.Draining} {
		t.Run(st.String(), func(t *testing.T) {
			r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: (&logs{}).logger()}, newState(st).State)
			require.NoError(t, err)
			require.NoError(t, r.Close(context.Background()))
			rep := r.Ready(t.Context())
			assert.Equal(t, readiness.StatusFail, rep.Status)
			assert.Equal(t, "stopped", rep.Reason, "reason after Close")
			assert.Equal(t, lifecycle.Stopped, rep.State, "state after Close")
		})
	}
}

// A check stuck in a call that ignores its context is joined by later
// evaluations after its deadline passed: its duration (the body's
// duration_ms, health_check_duration_ms) is how long the call has run, not
// the later evaluation's wait of nothing, which made it read as 0 ms.
func TestAStuckCheckReportsHowLongItHasRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		prom := prometheus.NewRegistry()
		r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1",
			Logger: (&logs{}).logger(), Registerer: prom}, newState(lifecycle.Running).State)
		require.NoError(t, err)
		release := make(chan struct{})
		defer func() { close(release); require.NoError(t, r.Close(context.Background())) }()
		const timeout = 100 * time.Millisecond
		mustAdd(t, r, readiness.Check{Name: "db", Timeout: timeout, Probe: func(context.Context) error {
			<-release // ignores its context
			return nil
		}})
		start := time.Now()
		for i := range 3 {
			rep := r.Ready(t.Context())
			c, _ := findCheck(rep, "db")
			assert.Equal(t, readiness.StatusFail, c.Status, "probe %d", i)
			assert.Equal(t, time.Since(start), c.Duration, "probe %d's duration: %q", i, c.Message)
			time.Sleep(time.Minute) // past any cache: the next probe waits for a fresh evaluation
		}
		mfs, err := prom.Gather()
		require.NoError(t, err)
		var found bool
		for _, mf := range mfs {
			if mf.GetName() == "health_check_duration_ms" {
				found = true
				h := mf.GetMetric()[0].GetHistogram()
				assert.Equal(t, uint64(3), h.GetSampleCount())
				assert.InDelta(t, float64((timeout+(time.Minute+timeout)+(2*time.Minute+timeout))/time.Millisecond), h.GetSampleSum(), 1, "sum of the observed ms")
			}
		}
		assert.True(t, found, "health_check_duration_ms gathered")
	})
}

// Heartbeat refuses the mistakes Add refuses (an empty or taken name, a
// bad duration) as configuration errors too: lifecycle.ErrConfig, exit 78
// under fxmodule.Run, the same mistake giving the same error everywhere.
func TestHeartbeatMistakesAreConfigErrors(t *testing.T) {
	r := newRegistry(t, newState(lifecycle.Starting), nil)
	_, err := r.Heartbeat("loop", time.Second)
	require.NoError(t, err)
	tests := []struct {
		give   string
		maxGap time.Duration
	}{
		{"", time.Second},
		{"loop", time.Second},
		{"other", 0},
	}
	for _, tt := range tests {
		_, err := r.Heartbeat(tt.give, tt.maxGap)
		assert.ErrorIs(t, err, lifecycle.ErrConfig, "Heartbeat(%q, %v)", tt.give, tt.maxGap)
	}
}
