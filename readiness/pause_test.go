package readiness_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// pauser stands in for a process that is not running (SIGSTOP, a paused
// VM, CPU throttling): while paused, the registry's clock cannot tick, as
// the watched loop cannot beat.
type pauser struct {
	mu      sync.Mutex
	stopped chan struct{} // non-nil while paused; closed by resume
}

func (p *pauser) tick() {
	p.mu.Lock()
	c := p.stopped
	p.mu.Unlock()
	if c != nil {
		<-c
	}
}

func (p *pauser) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = make(chan struct{})
}

func (p *pauser) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.stopped)
	p.stopped = nil
}

// A pause of the whole process is not a stuck loop: the first live probe
// after a 6 s pause of a loop with a 4 s budget answers ok, and a loop that
// stays silent for its budget of running time afterwards still fails.
func TestHeartbeatDoesNotCountAProcessPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pauser{}
		t.Cleanup(readiness.SetClockTicking(p.tick))
		r := newRegistry(t, newState(lifecycle.Running), nil)
		beat, err := r.Heartbeat("outbox_worker", 4*time.Second)
		require.NoError(t, err)
		require.Equal(t, readiness.StatusOK, r.Live().Status, "fresh heartbeat")
		time.Sleep(time.Second) // the loop runs, then beats
		beat()

		p.pause()
		time.Sleep(6 * time.Second) // the process is stopped: neither clock nor loop runs
		p.resume()
		rep := r.Live()
		c, _ := findCheck(rep, "outbox_worker")
		assert.Equal(t, readiness.StatusOK, rep.Status, "first probe after a 6s pause (%q)", c.Message)

		time.Sleep(4 * time.Second) // running again, and the loop stays silent
		rep = r.Live()
		c, _ = findCheck(rep, "outbox_worker")
		assert.Equal(t, readiness.StatusFail, rep.Status, "silent for 4s of running time after the pause (%q)", c.Message)
		hasPrefix(t, c.Message, "no heartbeat for 4", "silent for 4s of running time after the pause")
		beat()
		assert.Equal(t, readiness.StatusOK, r.Live().Status, "after a beat")
	})
}

// The clock runs from the flip to Running, so a pause before the first
// live probe is not counted either: orchestrators probe liveness every
// few seconds, and the first probe may come after the pause.
func TestHeartbeatDoesNotCountAPauseBeforeTheFirstProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pauser{}
		t.Cleanup(readiness.SetClockTicking(p.tick))
		st := newState(lifecycle.Starting)
		r := newRegistry(t, st, nil)
		_, err := r.Heartbeat("outbox_worker", 4*time.Second)
		require.NoError(t, err)
		st.set(lifecycle.Running)
		r.OnTransition(lifecycle.Transition{From: lifecycle.Starting, To: lifecycle.Running})
		time.Sleep(time.Second)
		p.pause()
		time.Sleep(6 * time.Second)
		p.resume()
		rep := r.Live()
		c, _ := findCheck(rep, "outbox_worker")
		assert.Equal(t, readiness.StatusOK, rep.Status, "first live probe ever, after a 6s pause (%q)", c.Message)
	})
}

// While Starting, heartbeats do not fail liveness (the loops start with the
// app's last start hooks, which may wait on a dependency); the flip to
// Running counts as a beat, so each loop has one gap from there.
func TestHeartbeatIsJudgedFromTheFlipToRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newState(lifecycle.Starting)
		r := newRegistry(t, st, nil)
		_, err := r.Heartbeat("outbox_worker", time.Second)
		require.NoError(t, err)
		time.Sleep(3 * time.Second) // a start waiting on Redis
		assert.NotEqual(t, readiness.StatusFail, r.Live().Status, "starting, loop not started for 3s")
		st.set(lifecycle.Running)
		r.OnTransition(lifecycle.Transition{From: lifecycle.Starting, To: lifecycle.Running})
		assert.Equal(t, readiness.StatusOK, r.Live().Status, "at the flip to Running")
		time.Sleep(2 * time.Second)
		assert.Equal(t, readiness.StatusFail, r.Live().Status, "running, loop silent for 2s with a 1s gap")
	})
}

// A process that is starved rather than stopped (its clock ticks late, but
// ticks) still fails a loop that never beats: late ticks count up to
// their cap each.
func TestHeartbeatFailsAStuckLoopOnAStarvedProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pauser{}
		t.Cleanup(readiness.SetClockTicking(p.tick))
		r := newRegistry(t, newState(lifecycle.Running), nil)
		_, err := r.Heartbeat("loop", time.Second)
		require.NoError(t, err)
		r.Live()       // starts the clock
		for range 20 { // the clock held 250 ms at a time: each late tick counts 200 ms
			p.pause()
			time.Sleep(250 * time.Millisecond)
			p.resume()
			synctest.Wait()
		}
		assert.Equal(t, readiness.StatusFail, r.Live().Status, "loop silent for 5s of a starved process")
	})
}

// The clock's goroutine ends once the process drains (liveness is no
// longer enforced), without waiting for Close.
func TestHeartbeatClockStopsWhenDraining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ticks atomic.Int32
		t.Cleanup(readiness.SetClockTicking(func() { ticks.Add(1) }))
		st := newState(lifecycle.Running)
		r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: (&logs{}).logger()}, st.State)
		require.NoError(t, err)
		_, err = r.Heartbeat("loop", time.Second)
		require.NoError(t, err)
		r.Live() // starts the clock
		time.Sleep(time.Second)
		require.NotZero(t, ticks.Load(), "the clock did not tick while running")
		st.set(lifecycle.Draining)
		time.Sleep(time.Second)
		after := ticks.Load()
		time.Sleep(time.Second)
		assert.Zero(t, ticks.Load()-after, "clock ticks in a second of draining: its goroutine outlives the process's liveness")
	})
}
