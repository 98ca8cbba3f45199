package readiness_test

import (
	"context"
	"errors"
	"fmt"
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

// A start that ends not ready says why: "not ready, starting" and "not
// ready, a check fails" are different facts, though both answer fail. A
// replica whose Redis was down at its start logged no line naming the
// check, only "starting".
func TestAStartThatEndsNotReadyNamesTheCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newState(lifecycle.Starting)
		l := &logs{}
		r := newRegistry(t, st, l)
		mustAdd(t, r, readiness.Check{Name: "redis", Probe: (&counter{err: errors.New("connection refused")}).probe})
		r.Ready(t.Context())
		st.set(lifecycle.Running)
		r.OnTransition(lifecycle.Transition{From: lifecycle.Starting, To: lifecycle.Running})
		r.Ready(t.Context())
		r.Ready(t.Context()) // the same answer: no new line
		var changes []map[string]any
		for _, rec := range l.records(t) {
			if rec["msg"] == "readiness changed" {
				changes = append(changes, rec)
			}
		}
		require.Len(t, changes, 2, "readiness changed lines: want unknown→fail while starting, then fail→fail naming the check")
		assert.Equal(t, "starting", changes[0]["reason"])
		assert.Equal(t, []any{"fail", "fail", "redis", "connection refused"},
			[]any{changes[1]["old_status"], changes[1]["new_status"], changes[1]["failed_check"], changes[1]["reason"]})
	})
}

// A start that ends in a drain or in Close, not at Running, changes no
// status: no second line ("fail" to "fail", naming no check).
func TestAStartThatEndsInADrainLogsOneLine(t *testing.T) {
	for _, to := range []lifecycle.State{lifecycle.Draining, lifecycle.Stopped} {
		t.Run(to.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newState(lifecycle.Starting)
				l := &logs{}
				r := newRegistry(t, st, l)
				mustAdd(t, r, readiness.Check{Name: "redis", Probe: (&counter{}).probe})
				r.Ready(t.Context())
				if to == lifecycle.Stopped {
					require.NoError(t, r.Close(context.Background()))
				} else {
					st.set(to)
					r.OnTransition(lifecycle.Transition{From: lifecycle.Starting, To: to})
				}
				r.Ready(t.Context())
				var changes int
				for _, rec := range l.records(t) {
					if rec["msg"] == "readiness changed" {
						changes++
					}
				}
				assert.Equal(t, 1, changes, "readiness changed lines: want only unknown→fail while starting")
			})
		})
	}
}

// At the move to Running one line says what the probes judge: the checks
// by tier, in the order added, and each heartbeat with its longest gap.
func TestRunningSaysWhatTheProbesJudge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newState(lifecycle.Starting)
		l := &logs{}
		r := newRegistry(t, st, l)
		mustAdd(t, r, readiness.Check{Name: "db", Probe: (&counter{}).probe})
		mustAdd(t, r, readiness.Check{Name: "tenant_a", Tier: readiness.Informational, Probe: (&counter{}).probe})
		mustAdd(t, r, readiness.Check{Name: "redis", Probe: (&counter{}).probe})
		_, err := r.Heartbeat("outbox", 5*time.Second)
		require.NoError(t, err)

		st.set(lifecycle.Running)
		r.OnTransition(lifecycle.Transition{From: lifecycle.Starting, To: lifecycle.Running})
		var lines []map[string]any
		for _, rec := range l.records(t) {
			if rec["msg"] == "readiness checks" {
				lines = append(lines, rec)
			}
		}
		require.Len(t, lines, 1, "readiness checks lines in %v", l.records(t))
		for k, want := range map[string]string{"gating": "db,redis", "informational": "tenant_a", "heartbeats": "outbox(5s)"} {
			assert.Equal(t, want, lines[0][k], "%s in the readiness checks line", k)
		}
	})
}

// A probe that evaluated "ok" (its check recovered) while the flip came
// never records it after the flip: not in the gauge, not as a fail→ok log
// line. The flip begins at each of the probe's reads of the
// state in turn, on a goroutine of its own as the manager's flip does (the
// state, then the listener), and the probe goes on meanwhile.
func TestAProbeRacingTheFlipNeverRecordsReadyAfterIt(t *testing.T) {
	for k := int32(1); k <= 6; k++ {
		t.Run(fmt.Sprintf("flip at state read %d", k), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newState(lifecycle.Running)
				l := &logs{}
				prom := prometheus.NewRegistry()
				var r *readiness.Registry
				var reads, at atomic.Int32
				var happened atomic.Bool
				done := make(chan struct{})
				happen := func() {
					if !happened.CompareAndSwap(false, true) {
						return
					}
					go func() {
						defer close(done)
						st.set(lifecycle.Draining)
						r.OnTransition(lifecycle.Transition{From: lifecycle.Running, To: lifecycle.Draining})
					}()
				}
				r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: l.logger(), Registerer: prom},
					func() lifecycle.State {
						cur := st.State()
						if reads.Add(1) == at.Load() {
							happen()
						}
						return cur
					})
				require.NoError(t, err)
				defer r.Close(context.Background())
				db := &counter{err: errors.New("db down")}
				mustAdd(t, r, readiness.Check{Name: "db", Probe: db.probe})
				r.Ready(t.Context()) // unknown→fail
				db.err = nil
				time.Sleep(time.Minute) // past the failing result's cache
				at.Store(reads.Load() + k)
				r.Ready(t.Context())
				if !happened.Load() { // the probe read the state fewer than k times
					happen()
				}
				<-done
				v, _ := metricValue(t, prom, "health_ready_status", "")
				assert.Zero(t, v, "health_ready_status after the flip")
				recs := l.records(t)
				require.NotEmpty(t, recs)
				for i, rec := range recs {
					t.Logf("line %d: %v→%v %v", i, rec["old_status"], rec["new_status"], rec["reason"])
				}
				assert.Equal(t, "fail", recs[len(recs)-1]["new_status"], "the last readiness line's new_status")
			})
		})
	}
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

// A probe that answered from the older evaluation (a refresh was running)
// and is held up before it records its status does not overwrite the
// newer status another probe recorded meanwhile: no fail→ok line that
// never was, and the gauge keeps the newer status.
func TestAProbeOfAnOlderEvaluationRecordsNoTransition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		var armed atomic.Bool
		hold, release := make(chan struct{}), make(chan struct{})
		state := func() lifecycle.State {
			if armed.Load() && calls.Add(1) == 2 { // the first probe's read after its results
				close(hold)
				<-release
			}
			return lifecycle.Running
		}
		r, l, reg := failingAfterOK(t, state)
		time.Sleep(readiness.DefaultCacheTTL + time.Millisecond) // the result is stale: the next probe answers it and refreshes

		armed.Store(true)
		first := make(chan readiness.Report)
		go func() { first <- r.Ready(t.Context()) }()
		<-hold
		armed.Store(false)
		synctest.Wait() // the refresh lands: db fails
		require.Equal(t, readiness.StatusFail, r.Ready(t.Context()).Status, "a probe after the refresh")
		close(release)
		assert.Equal(t, readiness.StatusOK, (<-first).Status, "the held-up probe's answer: the older evaluation's")

		assertRecordedOKThenFail(t, l, reg)
	})
}

// A prober whose period falls between a failing result's freshness and
// 2×CacheTTL answers from the previous evaluation every time, and its own
// refresh lands before it records: its status is still recorded, as no
// probe answered from a newer evaluation. (Recording only from the latest
// evaluation left the gauge at ready through ten failing probes.)
func TestAProberAnsweringFromThePreviousEvaluationRecordsItsStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var preempt atomic.Bool
		state := func() lifecycle.State {
			if preempt.Load() {
				time.Sleep(time.Millisecond) // the probe's goroutine is descheduled a moment
			}
			return lifecycle.Running
		}
		r, l, reg := failingAfterOK(t, state)
		preempt.Store(true)
		for range 3 {
			time.Sleep(readiness.DefaultCacheTTL * 3 / 2)
			r.Ready(t.Context())
			synctest.Wait()
		}
		assertRecordedOKThenFail(t, l, reg)
	})
}

// failingAfterOK returns a registry on state whose one gating check, db,
// passed one probe and fails from then on, with its logs and metrics.
func failingAfterOK(t *testing.T, state func() lifecycle.State) (*readiness.Registry, *logs, *prometheus.Registry) {
	t.Helper()
	l, reg := &logs{}, prometheus.NewRegistry()
	r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: l.logger(), Registerer: reg}, state)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	var failing atomic.Bool
	mustAdd(t, r, readiness.Check{Name: "db", Probe: func(context.Context) error {
		if failing.Load() {
			return errors.New("dial tcp: connection refused")
		}
		return nil
	}})
	require.Equal(t, readiness.StatusOK, r.Ready(t.Context()).Status)
	failing.Store(true)
	return r, l, reg
}

// assertRecordedOKThenFail checks that the transition lines and the gauge
// say ok, then fail, and nothing after.
func assertRecordedOKThenFail(t *testing.T, l *logs, reg *prometheus.Registry) {
	t.Helper()
	var got []string
	for _, rec := range l.records(t) {
		if rec["msg"] == "readiness changed" {
			got = append(got, fmt.Sprint(rec["old_status"], "→", rec["new_status"]))
		}
	}
	assert.Equal(t, []string{"unknown→ok", "ok→fail"}, got, "transition lines")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "health_ready_status" {
			assert.Equal(t, 0.0, mf.GetMetric()[0].GetGauge().GetValue(), "health_ready_status")
		}
	}
}
