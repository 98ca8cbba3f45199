package readiness_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// The flip is logged when it happens, not at the next probe, and exactly once.
func TestOnTransitionLogsTheFlip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newState(lifecycle.Running)
		l := &logs{}
		r := newRegistry(t, st, l)
		mustAdd(t, r, readiness.Check{Name: "db", Probe: (&counter{}).probe})
		r.Ready(t.Context())

		st.set(lifecycle.Draining)
		r.OnTransition(lifecycle.Transition{From: lifecycle.Running, To: lifecycle.Draining})
		recs := l.records(t)
		if len(recs) != 2 {
			t.Fatalf("got %d log lines; want 2 (unknown→ok, ok→fail at the flip): %v", len(recs), recs)
		}
		if got := recs[1]["new_status"]; got != "fail" {
			t.Errorf("flip line new_status = %v; want fail", got)
		}
		if got := recs[1]["reason"]; got != "draining" {
			t.Errorf("flip line reason = %v; want draining", got)
		}
		r.Ready(t.Context()) // the next probe sees the same status: no new line
		if n := len(l.records(t)); n != 2 {
			t.Errorf("got %d log lines after a probe; want still 2", n)
		}
	})
}

// A heartbeat is fresh when registered, stale once silent for longer than
// its gap, and fresh again after a beat: what the live probe lists for it.
func TestHeartbeatFresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), &logs{})
		beat, err := r.Heartbeat("outbox_worker", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		fresh := func() bool {
			c, ok := findCheck(r.Live(), "outbox_worker")
			if !ok {
				t.Fatal("heartbeat outbox_worker not listed by the live probe")
			}
			return c.Status == readiness.StatusOK
		}
		if !fresh() {
			t.Error("new heartbeat: not fresh; want fresh")
		}
		time.Sleep(2 * time.Second) // fake time: the loop has been silent
		if fresh() {
			t.Error("silent for 2s with a 1s gap: fresh; want stale")
		}
		beat()
		if !fresh() {
			t.Error("after a beat: not fresh; want fresh")
		}
	})
}

// While probes keep coming, an expired result is answered at once and
// refreshed behind them; after a quiet spell (older than 2×CacheTTL) the
// next probe waits for a fresh answer rather than report an old one.
func TestStaleWhileRevalidateAndQuietSpell(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), &logs{})
		var down atomic.Bool
		mustAdd(t, r, readiness.Check{Name: "db", Probe: func(ctx context.Context) error {
			time.Sleep(50 * time.Millisecond) // a real round trip
			if down.Load() {
				return errors.New("connection refused")
			}
			return nil
		}})
		r.Ready(t.Context()) // first evaluation: ok
		down.Store(true)

		time.Sleep(readiness.DefaultCacheTTL + time.Millisecond) // expired, not stale
		start := time.Now()
		if rep := r.Ready(t.Context()); rep.Status != readiness.StatusOK {
			t.Errorf("probe after 1 TTL: got %s; want the last result (ok), answered at once", rep.Status)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("probe after 1 TTL waited %v; want 0 (no queueing behind a refresh)", waited)
		}
		time.Sleep(100 * time.Millisecond) // the refresh it started lands (fake time)
		if rep := r.Ready(t.Context()); rep.Status != readiness.StatusFail {
			t.Errorf("next probe: got %s; want the refreshed fail", rep.Status)
		}

		down.Store(false)
		time.Sleep(3 * readiness.DefaultCacheTTL) // nobody probed for a while
		if rep := r.Ready(t.Context()); rep.Status != readiness.StatusOK {
			t.Errorf("probe after a quiet spell: got %s; want a fresh ok, not the old fail", rep.Status)
		}
	})
}

// After a quiet spell no probe answers from the old result, not even one
// that arrives while another probe's refresh is running.
func TestNoOldResultWhileAQuietSpellRefreshes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), &logs{})
		var down atomic.Bool
		mustAdd(t, r, readiness.Check{Name: "db", Probe: func(ctx context.Context) error {
			time.Sleep(50 * time.Millisecond)
			if down.Load() {
				return errors.New("connection refused")
			}
			return nil
		}})
		r.Ready(t.Context()) // ok, an hour ago
		down.Store(true)
		time.Sleep(time.Hour)
		got := make(chan string, 2)
		for range 2 { // the first starts the refresh, the second arrives during it
			go func() { got <- r.Ready(t.Context()).Status }()
			synctest.Wait()
		}
		for range 2 {
			if s := <-got; s != readiness.StatusFail {
				t.Errorf("probe after an hour of silence: got %s; want the fresh fail, not the hour-old ok", s)
			}
		}
	})
}
