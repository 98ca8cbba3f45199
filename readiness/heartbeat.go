package readiness

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Heartbeat is a liveness watchdog for one main loop (a room manager, an
// outbox worker, a consumer). The loop calls [Heartbeat.Beat] each time round;
// liveness fails when the last beat is older than the heartbeat's gap.
//
// A Heartbeat counts as beaten when it is created, so a loop has one gap to
// start.
type Heartbeat struct {
	name   string
	maxGap time.Duration
	epoch  time.Time    // monotonic reference for last
	last   atomic.Int64 // nanoseconds since epoch of the last beat
}

// Beat records that the loop is alive. It is safe for concurrent use and does
// not allocate.
func (h *Heartbeat) Beat() { h.last.Store(int64(time.Since(h.epoch))) }

// Fresh reports whether the last beat is within the heartbeat's maxGap, the
// test liveness applies, without evaluating liveness (no transition log, no
// metric): for a gauge such as room_outbox_worker_alive.
func (h *Heartbeat) Fresh() bool { return h.age(time.Now()) <= h.maxGap }

// age is how long ago the last beat was.
func (h *Heartbeat) age(now time.Time) time.Duration {
	return now.Sub(h.epoch) - time.Duration(h.last.Load())
}

// Heartbeat registers a liveness watchdog named name that fails liveness once
// it has not beaten for longer than maxGap. Names are unique among heartbeats.
func (r *Registry) Heartbeat(name string, maxGap time.Duration) (*Heartbeat, error) {
	if name == "" {
		return nil, fmt.Errorf("readiness: heartbeat name is empty")
	}
	if maxGap <= 0 {
		return nil, fmt.Errorf("readiness: heartbeat %q: maxGap is %v; want a positive duration", name, maxGap)
	}
	h := &Heartbeat{name: name, maxGap: maxGap, epoch: time.Now()}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.heartbeats {
		if o.name == name {
			return nil, fmt.Errorf("readiness: heartbeat %q: %w", name, ErrDuplicate)
		}
	}
	r.heartbeats = append(r.heartbeats, h)
	return h, nil
}
