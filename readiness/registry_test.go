package readiness_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v; want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v; want error containing %q", err, tt.wantErr)
			}
		})
	}
	if _, err := readiness.New(ok, nil); err == nil {
		t.Errorf("New(cfg, nil) = nil error; want an error for the missing state source")
	}
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
		{"duplicate", readiness.Check{Name: "db", Probe: probe}, `check "db": readiness: duplicate name`},
		{"empty name", readiness.Check{Probe: probe}, "name is empty"},
		{"nil probe", readiness.Check{Name: "x"}, `check "x": Probe is nil`},
		{"negative timeout", readiness.Check{Name: "x", Probe: probe, Timeout: -time.Millisecond}, "Timeout is -1ms"},
		{"bad tier", readiness.Check{Name: "x", Probe: probe, Tier: 7}, "Tier is tier(7)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.Add(tt.give)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Add() = %v; want error containing %q", err, tt.wantErr)
			}
		})
	}
	if err := r.Add(readiness.Check{Name: "db", Probe: probe}); !errors.Is(err, readiness.ErrDuplicate) {
		t.Errorf("Add(duplicate) = %v; want ErrDuplicate", err)
	}
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
				if rep.Status != tt.wantStatus {
					t.Errorf("Status = %q; want %q", rep.Status, tt.wantStatus)
				}
				if got := strings.Join(rep.Failed(), ","); got != strings.Join(tt.wantFailed, ",") {
					t.Errorf("Failed() = %q; want %q", got, strings.Join(tt.wantFailed, ","))
				}
				for _, name := range tt.wantFailed {
					if c, _ := findCheck(rep, name); c.Message != "boom" {
						t.Errorf("check %s message = %q; want %q", name, c.Message, "boom")
					}
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
			if took := time.Since(start); took > readiness.DefaultReadyTimeout {
				t.Fatalf("probe %d took %v; want at most %v", i, took, readiness.DefaultReadyTimeout)
			}
			c, _ := findCheck(rep, "stuck")
			if c.Status != readiness.StatusFail || !strings.HasPrefix(c.Message, "deadline exceeded") {
				t.Errorf("probe %d: stuck = %s %q; want fail \"deadline exceeded…\"", i, c.Status, c.Message)
			}
			if h, _ := findCheck(rep, "healthy"); h.Status != readiness.StatusOK {
				t.Errorf("probe %d: healthy = %s %q; want ok: a hung check must not mask it", i, h.Status, h.Message)
			}
			time.Sleep(2 * readiness.DefaultCacheTTL) // fake time: expire the cache
		}
		if got := stuck.runs.Load(); got != 1 {
			t.Errorf("hung check started %d times; want 1", got)
		}
		if got := healthy.runs.Load(); got != 10 {
			t.Errorf("healthy check ran %d times; want 10 (one per evaluation)", got)
		}
		rep := r.Ready(t.Context())
		c, _ := findCheck(rep, "stuck")
		if !strings.Contains(c.Message, "running 2") { // started ~20s of fake time ago
			t.Errorf("stuck message = %q; want its age, about 20s", c.Message)
		}
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
		if took := time.Since(start); took != readiness.DefaultReadyTimeout {
			t.Errorf("probe took %v; want %v (the whole-evaluation deadline)", took, readiness.DefaultReadyTimeout)
		}
	})
}

func TestPanickingCheckFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), nil)
		mustAdd(t, r, readiness.Check{Name: "bad", Probe: func(context.Context) error { panic("boom") }})
		rep := r.Ready(t.Context())
		if c, _ := findCheck(rep, "bad"); rep.Status != readiness.StatusFail || c.Message != "panic: boom" {
			t.Errorf("got %s with message %q; want fail with %q", rep.Status, c.Message, "panic: boom")
		}
	})
}

func TestStateAnswersWithoutChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newState(lifecycle.Starting)
		r := newRegistry(t, st, nil)
		db := &counter{}
		mustAdd(t, r, readiness.Check{Name: "db", Probe: db.probe})

		if rep := r.Ready(t.Context()); rep.Status != readiness.StatusFail || rep.Reason != "starting" {
			t.Errorf("starting: got %s %q; want fail \"starting\"", rep.Status, rep.Reason)
		}
		st.set(lifecycle.Running)
		if rep := r.Ready(t.Context()); rep.Status != readiness.StatusOK {
			t.Errorf("running: got %s; want ok", rep.Status)
		}
		// The cached "ok" is fresh, yet the first probe after the flip fails.
		st.set(lifecycle.Draining)
		if rep := r.Ready(t.Context()); rep.Status != readiness.StatusFail || rep.Reason != "draining" {
			t.Errorf("draining: got %s %q; want fail \"draining\"", rep.Status, rep.Reason)
		}
		time.Sleep(2 * readiness.DefaultCacheTTL)
		r.Ready(t.Context())
		if got := db.runs.Load(); got != 1 {
			t.Errorf("check ran %d times; want 1 (only while running)", got)
		}
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
					if rep := r.Ready(context.Background()); rep.Status != readiness.StatusOK {
						t.Errorf("step %d: status %s; want ok", step, rep.Status)
					}
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
		if got := slow.runs.Load(); got != 3 {
			t.Errorf("check ran %d times in 3 s; want 3 (once per TTL window)", got)
		}
		want := map[int]int{0: probes}
		for step, got := range waited {
			if got != want[step] {
				t.Errorf("step %d: %d probes waited; want %d", step, got, want[step])
			}
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
		if rep := r.Ready(ctx); rep.Status != readiness.StatusFail {
			t.Errorf("abandoned probe: got %s; want fail (nothing to answer from yet)", rep.Status)
		}
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if sawCancel {
			t.Errorf("check saw its context cancelled when the first prober left; want the evaluation to go on")
		}
		if rep := r.Ready(t.Context()); rep.Status != readiness.StatusOK {
			t.Errorf("next probe: got %s; want ok from the evaluation the first prober started", rep.Status)
		}
		if got := check.runs.Load(); got != 1 {
			t.Errorf("check ran %d times; want 1", got)
		}
	})
}

func TestCloseWaitsForChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := readiness.New(readiness.Config{Service: "s", NodeID: "n", Logger: (&logs{}).logger()}, newState(lifecycle.Running).State)
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		mustAdd(t, r, readiness.Check{Name: "stuck", Probe: hung(&counter{}, release)})
		r.Ready(t.Context())
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := r.Close(ctx); err == nil || !strings.Contains(err.Error(), "stuck (running") {
			t.Errorf("Close with a hung check = %v; want the context's error naming the check", err)
		}
		close(release)
		if err := r.Close(t.Context()); err != nil {
			t.Errorf("Close after release = %v; want nil", err)
		}
		if rep := r.Ready(t.Context()); rep.Status != readiness.StatusFail || rep.Reason != "stopped" {
			t.Errorf("after Close: got %s %q; want fail \"stopped\"", rep.Status, rep.Reason)
		}
		if err := r.Add(readiness.Check{Name: "x", Probe: (&counter{}).probe}); !errors.Is(err, readiness.ErrClosed) {
			t.Errorf("Add after Close = %v; want ErrClosed", err)
		}
	})
}

// A result cached before Close must not answer a probe after it: the
// process may still be Running (the drain closes readiness in its last
// phase), but its checks can no longer run.
func TestClosedRegistryAnswersStoppedFromCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := readiness.New(readiness.Config{Service: "s", NodeID: "n", Logger: (&logs{}).logger()}, newState(lifecycle.Running).State)
		if err != nil {
			t.Fatal(err)
		}
		c := &counter{}
		mustAdd(t, r, readiness.Check{Name: "db", Tier: readiness.Gating, Probe: c.probe})
		if rep := r.Ready(t.Context()); rep.Status != readiness.StatusOK {
			t.Fatalf("before Close: got %s; want ok", rep.Status)
		}
		if err := r.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		runs := c.runs.Load()
		for range 3 { // within the cache's TTL and after it
			rep := r.Ready(t.Context())
			if rep.Status != readiness.StatusFail || rep.Reason != "stopped" {
				t.Errorf("after Close: got %s %q; want fail \"stopped\"", rep.Status, rep.Reason)
			}
			time.Sleep(time.Second) // synctest: advances the fake clock past CacheTTL
		}
		if got := c.runs.Load(); got != runs {
			t.Errorf("checks run after Close: got %d; want 0", got-runs)
		}
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
	if err != nil {
		t.Fatal(err)
	}
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
		rep := r.Ready(t.Context())
		if c, _ := findCheck(rep, "pool"); !strings.HasPrefix(c.Message, "deadline exceeded") {
			t.Errorf("pool = %s %q; want fail \"deadline exceeded…\"", c.Status, c.Message)
		}
	}
	// Every run that began ends by its own 20 ms timeout and reports.
	n := int(runs.Load())
	if n == 0 {
		t.Fatal("the check never ran")
	}
	errs := make([]error, n)
	for i := range errs {
		errs[i] = <-done
	}
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("run %d: the check's context ended with %v; want %v", i, err, context.DeadlineExceeded)
		}
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
				if got := c.runs.Load(); got != tt.wantRuns {
					t.Errorf("check ran %d times in 2 s; want %d", got, tt.wantRuns)
				}
			})
		})
	}
}
