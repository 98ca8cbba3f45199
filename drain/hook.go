package drain

import (
	"context"
	"fmt"
	"time"
)

// Phase orders drain hooks. Hooks of one phase run concurrently; phases run in
// the order of their values, StopIntake first.
type Phase int

// The phases of a drain, in the order they run.
const (
	// StopIntake closes listeners, sends gRPC GOAWAY and stops fetching new work.
	StopIntake Phase = iota
	// WaitInFlight waits for in-flight requests, RPCs, batches and messages.
	WaitInFlight
	// Flush writes what must survive the process, such as room snapshots.
	Flush
	// Release gives up what others may take over, such as leases.
	Release
	// Close closes clients (Redis, databases) once nothing uses them.
	Close
)

var phaseNames = [...]string{"stop_intake", "wait_in_flight", "flush", "release", "close"}

// String returns the phase's name as used in reports, logs and metric labels.
func (p Phase) String() string {
	if p < 0 || int(p) >= len(phaseNames) {
		return fmt.Sprintf("phase(%d)", int(p))
	}
	return phaseNames[p]
}

// valid reports whether p is one of the defined phases.
func (p Phase) valid() bool { return p >= StopIntake && p <= Close }

// MarshalText encodes the phase by name.
func (p Phase) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Hook is one piece of drain work contributed by a service.
//
// Run receives a context that ends at min(Timeout, the drain deadline) and is
// cancelled early when the drain is forced (a second signal). Run should
// return promptly once its context is done: a hook that ignores it is
// abandoned at the deadline and reported as timed out.
type Hook struct {
	// Name identifies the hook in reports and logs; unique within a drain.
	Name string
	// Phase is when the hook runs.
	Phase Phase
	// Timeout is the hook's own budget; zero means only the drain deadline.
	Timeout time.Duration
	// Run does the work.
	Run func(ctx context.Context) error
	// Abort, if set, stops at once what the hook drains gracefully (closes
	// a server and its connections). [Run] calls it, after its last phase,
	// when the drain was cut short — forced, or out of time — whether the
	// hook ran, was abandoned or was skipped: a hook that began a graceful
	// drain which a later, skipped phase was to finish must not leave it
	// running. It must be safe to call after Run returned and must not block.
	Abort func()

	// streams, if set, is read once Run has returned or been given up on,
	// into HookResult.Streams.
	streams func() *StreamReport
}

// validate reports the first problem that would make the hook unusable.
// [Run] calls it for every hook and reports a hook that fails it as
// [Failed] without running it.
func (h Hook) validate() error {
	switch {
	case h.Name == "":
		return fmt.Errorf("drain: hook Name is empty")
	case !h.Phase.valid():
		return fmt.Errorf("drain: hook %q: Phase %d is not a defined phase", h.Name, int(h.Phase))
	case h.Timeout < 0:
		return fmt.Errorf("drain: hook %q: Timeout %s is negative", h.Name, h.Timeout)
	case h.Run == nil:
		return fmt.Errorf("drain: hook %q: Run is nil", h.Name)
	}
	return nil
}
