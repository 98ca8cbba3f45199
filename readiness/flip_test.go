package readiness_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		require.Len(t, recs, 2, "log lines: want unknown→ok, and ok→fail at the flip")
		assert.Equal(t, "fail", recs[1]["new_status"], "flip line new_status")
		assert.Equal(t, "draining", recs[1]["reason"], "flip line reason")
		r.Ready(t.Context()) // the next probe sees the same status: no new line
		assert.Len(t, l.records(t), 2, "log lines after a probe: want still 2")
	})
}

// A heartbeat is fresh when registered, stale once silent for longer than
// its gap, and fresh again after a beat: what the live probe lists for it.
func TestHeartbeatFresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), &logs{})
		beat, err := r.Heartbeat("outbox_worker", time.Second)
		require.NoError(t, err)
		fresh := func() bool {
			c, ok := findCheck(r.Live(), "outbox_worker")
			require.True(t, ok, "heartbeat outbox_worker not listed by the live probe")
			return c.Status == readiness.StatusOK
		}
		assert.True(t, fresh(), "new heartbeat: not fresh; want fresh")
		time.Sleep(2 * time.Second) // fake time: the loop has been silent
		assert.False(t, fresh(), "silent for 2s with a 1s gap: fresh; want stale")
		beat()
		assert.True(t, fresh(), "after a beat: not fresh; want fresh")
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
		rep := r.Ready(t.Context())
		waited := time.Since(start)
		assert.Equal(t, readiness.StatusOK, rep.Status, "probe after 1 TTL: want the last result, answered at once")
		assert.Zero(t, waited, "probe after 1 TTL waited: want no queueing behind a refresh")
		time.Sleep(100 * time.Millisecond) // the refresh it started lands (fake time)
		assert.Equal(t, readiness.StatusFail, r.Ready(t.Context()).Status, "next probe: want the refreshed fail")

		down.Store(false)
		time.Sleep(3 * readiness.DefaultCacheTTL) // nobody probed for a while
		assert.Equal(t, readiness.StatusOK, r.Ready(t.Context()).Status, "probe after a quiet spell: want a fresh ok, not the old fail")
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
			assert.Equal(t, readiness.StatusFail, <-got, "probe after an hour of silence: want the fresh fail, not the hour-old ok")
		}
	})
}
