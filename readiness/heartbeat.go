package readiness

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/lifecycle"
)

// heartbeat is a liveness watchdog for one main loop; see
// [Registry.Heartbeat].
type heartbeat struct {
	name   string
	maxGap time.Duration
	clock  *runClock
	last   atomic.Int64 // the clock's running time at the last beat
}

// beat records that the loop is alive.
func (h *heartbeat) beat() { h.last.Store(int64(h.clock.now())) }

// age is the running time since the last beat.
func (h *heartbeat) age() time.Duration { return h.clock.now() - time.Duration(h.last.Load()) }

// Heartbeat registers a liveness watchdog for one main loop and returns the
// function the loop calls each time round; a beat does not allocate.
// While Running, liveness fails once the loop has gone maxGap of running
// time without a beat (the flip to Running counts as one); a pause of the
// whole process (GC, throttling, SIGSTOP) is not counted. A loop that waits
// on a dependency gives each call a deadline shorter than maxGap and beats
// between attempts. An empty or taken name, a maxGap that is not positive,
// or a closed registry is refused.
func (r *Registry) Heartbeat(name string, maxGap time.Duration) (beat func(), err error) {
	if r.notNew() {
		return nil, errNotNew
	}
	if name == "" {
		return nil, configerr.Errorf("readiness: heartbeat name is empty")
	}
	if maxGap <= 0 {
		return nil, configerr.Errorf("readiness: heartbeat %q: maxGap is %v; want a positive duration", name, maxGap)
	}
	h := &heartbeat{name: name, maxGap: maxGap, clock: &r.clock}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return nil, fmt.Errorf("readiness: heartbeat %q: %w", name, ErrClosed)
	}
	for _, o := range r.heartbeats {
		if o.name == name {
			return nil, configerr.Errorf("readiness: two heartbeats named %q: give each its own name (%w)", name, ErrDuplicate)
		}
	}
	h.beat()
	r.heartbeats = append(r.heartbeats, h)
	if r.state() == lifecycle.Running {
		r.watchClockLocked()
	}
	return h.beat, nil
}

// watchClockLocked starts the clock's goroutine once there is a heartbeat
// to judge and the process runs (the flip to Running, a heartbeat registered
// or a live probe while Running, whichever is first); r.mu is held. Before it
// runs, running time is wall time. It stops at Close, or at the drain.
func (r *Registry) watchClockLocked() {
	if r.clock.started() || r.closed.Load() || len(r.heartbeats) == 0 {
		return
	}
	r.clock.start()
	for _, h := range r.heartbeats { // each loop gets one gap from here
		h.beat()
	}
	r.wg.Go(func() { r.clock.run(r.base.Done(), r.enforced) })
}
