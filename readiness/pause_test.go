package readiness_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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
		if err != nil {
			t.Fatal(err)
		}
		if rep := r.Live(); rep.Status != readiness.StatusOK {
			t.Fatalf("fresh heartbeat: got %s; want ok", rep.Status)
		}
		time.Sleep(time.Second) // the loop runs, then beats
		beat()

		p.pause()
		time.Sleep(6 * time.Second) // the process is stopped: neither clock nor loop runs
		p.resume()
		if rep := r.Live(); rep.Status != readiness.StatusOK {
			c, _ := findCheck(rep, "outbox_worker")
			t.Errorf("first probe after a 6s pause: got %s %q; want ok", rep.Status, c.Message)
		}

		time.Sleep(4 * time.Second) // running again, and the loop stays silent
		rep := r.Live()
		if c, _ := findCheck(rep, "outbox_worker"); rep.Status != readiness.StatusFail || !strings.HasPrefix(c.Message, "no heartbeat for 4") {
			t.Errorf("silent for 4s of running time after the pause: got %s %q; want fail \"no heartbeat for 4…\"", rep.Status, c.Message)
		}
		beat()
		if rep := r.Live(); rep.Status != readiness.StatusOK {
			t.Errorf("after a beat: got %s; want ok", rep.Status)
		}
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
		if _, err := r.Heartbeat("outbox_worker", 4*time.Second); err != nil {
			t.Fatal(err)
		}
		st.set(lifecycle.Running)
		r.OnTransition(lifecycle.Transition{From: lifecycle.Starting, To: lifecycle.Running})
		time.Sleep(time.Second)
		p.pause()
		time.Sleep(6 * time.Second)
		p.resume()
		if rep := r.Live(); rep.Status != readiness.StatusOK {
			c, _ := findCheck(rep, "outbox_worker")
			t.Errorf("first live probe ever, after a 6s pause: got %s %q; want ok", rep.Status, c.Message)
		}
	})
}

// While Starting, heartbeats do not fail liveness (the loops start with the
// app's last start hooks, which may wait on a dependency); the flip to
// Running counts as a beat, so each loop has one gap from there.
func TestHeartbeatIsJudgedFromTheFlipToRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newState(lifecycle.Starting)
		r := newRegistry(t, st, nil)
		if _, err := r.Heartbeat("outbox_worker", time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // a start waiting on Redis
		if rep := r.Live(); rep.Status == readiness.StatusFail {
			t.Errorf("starting, loop not started for 3s: got %s; want not fail", rep.Status)
		}
		st.set(lifecycle.Running)
		r.OnTransition(lifecycle.Transition{From: lifecycle.Starting, To: lifecycle.Running})
		if rep := r.Live(); rep.Status != readiness.StatusOK {
			t.Errorf("at the flip to Running: got %s; want ok", rep.Status)
		}
		time.Sleep(2 * time.Second)
		if rep := r.Live(); rep.Status != readiness.StatusFail {
			t.Errorf("running, loop silent for 2s with a 1s gap: got %s; want fail", rep.Status)
		}
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
		if _, err := r.Heartbeat("loop", time.Second); err != nil {
			t.Fatal(err)
		}
		r.Live()       // starts the clock
		for range 20 { // the clock held 250 ms at a time: each late tick counts 200 ms
			p.pause()
			time.Sleep(250 * time.Millisecond)
			p.resume()
			synctest.Wait()
		}
		if rep := r.Live(); rep.Status != readiness.StatusFail {
			t.Errorf("loop silent for 5s of a starved process: got %s; want fail", rep.Status)
		}
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
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Heartbeat("loop", time.Second); err != nil {
			t.Fatal(err)
		}
		r.Live() // starts the clock
		time.Sleep(time.Second)
		if ticks.Load() == 0 {
			t.Fatal("the clock did not tick while running")
		}
		st.set(lifecycle.Draining)
		time.Sleep(time.Second)
		after := ticks.Load()
		time.Sleep(time.Second)
		if got := ticks.Load(); got != after {
			t.Errorf("clock ticked %d times in a second of draining; want 0: its goroutine outlives the process's liveness", got-after)
		}
	})
}
