package readiness

import (
	"fmt"
	"sync/atomic"
	"time"
)

// heartbeat is a liveness watchdog for one main loop; see
// [Registry.Heartbeat].
type heartbeat struct {
	name   string
	maxGap time.Duration
	epoch  time.Time    // monotonic reference for last
	last   atomic.Int64 // nanoseconds since epoch of the last beat
}

// beat records that the loop is alive.
func (h *heartbeat) beat() { h.last.Store(int64(time.Since(h.epoch))) }

// age is how long ago the last beat was.
func (h *heartbeat) age(now time.Time) time.Duration {
	return now.Sub(h.epoch) - time.Duration(h.last.Load())
}

// Heartbeat registers a liveness watchdog for one main loop (a room
// manager, an outbox worker, a consumer) and returns the function the loop
// calls each time round. Liveness fails once the last call is older than
// maxGap; registering counts as a beat, so a loop has one gap to start.
// The beat is safe for concurrent use and does not allocate. Names are
// unique among heartbeats; an empty name or a maxGap that is not positive
// is refused.
func (r *Registry) Heartbeat(name string, maxGap time.Duration) (beat func(), err error) {
	if name == "" {
		return nil, fmt.Errorf("readiness: heartbeat name is empty")
	}
	if maxGap <= 0 {
		return nil, fmt.Errorf("readiness: heartbeat %q: maxGap is %v; want a positive duration", name, maxGap)
	}
	h := &heartbeat{name: name, maxGap: maxGap, epoch: time.Now()}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.heartbeats {
		if o.name == name {
			return nil, fmt.Errorf("readiness: heartbeat %q: %w", name, ErrDuplicate)
		}
	}
	r.heartbeats = append(r.heartbeats, h)
	return h.beat, nil
}
