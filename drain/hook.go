package drain

import (
	"context"
	"fmt"
	"time"
)

// Phase says when a hook runs. The five phases run in the order below,
// StopIntake first. A Phase is its name, as reports, logs and metric labels
// show it; the zero Phase is not one of them.
type Phase string

// The phases of a drain, in the order they run.
const (
	// StopIntake closes listeners, sends gRPC GOAWAY and stops fetching new work.
	StopIntake Phase = "stop_intake"
	// WaitInFlight waits for in-flight requests, RPCs, batches and messages.
	WaitInFlight Phase = "wait_in_flight"
	// Flush writes what must survive the process, such as room snapshots.
	Flush Phase = "flush"
	// Release gives up what others may take over, such as leases.
	Release Phase = "release"
	// Close closes clients (Redis, databases) once nothing uses them.
	Close Phase = "close"
)

// phases are the phases in the order they run.
var phases = [...]Phase{StopIntake, WaitInFlight, Flush, Release, Close}

// valid reports whether p is one of the defined phases.
func (p Phase) valid() bool {
	for _, q := range phases {
		if p == q {
			return true
		}
	}
	return false
}

// Hook is one piece of drain work contributed by a service. Run's context
// ends at min(Timeout, the drain deadline), or earlier when the drain is
// forced; a hook that ignores it is abandoned and reported as timed out.
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
	// a server). [Run] calls it after its last phase when the drain was cut
	// short, whether the hook ran or not, so that no graceful stop is left
	// running. It must be safe after Run returned, and must return
	// promptly: no wait beyond one short, bounded one (lease's Release
	// hook waits at most a call's time for its session's end).
	Abort func()

	// streams, if set, is read once Run has returned or been given up on,
	// into HookResult.Streams.
	streams func() *StreamReport
}

// Validate reports the first problem that makes the hook unusable, naming
// the field and the value: an empty Name, a Phase that is not one of the
// five, a negative Timeout or a nil Run. [Run] reports such a hook as
// [Failed] without running it; lifecycle.Manager.AddHook refuses it.
func (h Hook) Validate() error {
	switch {
	case h.Name == "":
		return fmt.Errorf("drain: hook Name is empty")
	case !h.Phase.valid():
		return fmt.Errorf("drain: hook %q: Phase %q is not one of %q", h.Name, h.Phase, phases)
	case h.Timeout < 0:
		return fmt.Errorf("drain: hook %q: Timeout %s is negative", h.Name, h.Timeout)
	case h.Run == nil:
		return fmt.Errorf("drain: hook %q: Run is nil", h.Name)
	}
	return nil
}
