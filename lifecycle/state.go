package lifecycle

import (
	"fmt"
	"time"

	"github.com/drainkit/drainkit/drain"
)

// State is a stage of the process's life. It only moves forward:
// Starting → Running → Draining → Stopped, or Starting → Draining →
// Stopped when a signal aborts the start or the start fails.
type State int32

// The states of a process, in order.
const (
	Starting State = iota
	Running
	Draining
	Stopped
)

var stateNames = [...]string{"starting", "running", "draining", "stopped"}

// String returns the state's lower-case name, as logged and reported.
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("state(%d)", int32(s))
	}
	return stateNames[s]
}

// canMove reports whether the state machine allows from → to.
func canMove(from, to State) bool {
	switch from {
	case Starting:
		return to == Running || to == Draining || to == Stopped
	case Running:
		return to == Draining
	case Draining:
		return to == Stopped
	}
	return false
}

// Transition describes one change of state, as given to listeners.
type Transition struct {
	From, To State
	// Reason says why, e.g. "signal: terminated" or "context canceled".
	Reason string
	// At is when the transition happened.
	At time.Time
	// Report is set on the transition to Stopped: what the drain did, from
	// the stop request (the propagation delay included) to its last hook.
	// What runs after the drain (fx's OnStop hooks, under package
	// fxmodule) is not in it yet. It is the
	// hook for exporting the drain, to a tracer say, before the process
	// closes its telemetry; read it during the call, do not keep it.
	Report *drain.Report
}
