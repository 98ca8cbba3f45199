package lifecycle

import (
	"fmt"
	"log/slog"
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
	// Reason says why, e.g. "signal: terminated" or "context: context canceled".
	Reason string
	// At is when the transition happened.
	At time.Time
	// Report is set on the transition to Stopped: what the drain did, from
	// the stop request (the propagation delay included) to its last hook,
	// without the work after the drain (fx's OnStop hooks under fxmodule).
	// It is the hook for exporting the drain, to a tracer say, before the
	// process closes its telemetry; read it during the call, do not keep it.
	Report *drain.Report
}

// markRunning moves Starting → Running once start-up has finished, and
// logs the drain hooks it would run. It fails if a stop was requested
// meanwhile: the caller should then drain.
func (m *Manager) markRunning() error {
	if err := m.transition(Running, "started", nil); err != nil {
		return err
	}
	m.logHooks()
	return nil
}

// transition moves to `to` if the state machine allows it, then runs the
// listeners, outside m.mu so that they may read the Manager, and logs the
// line after them: the readiness flip must not wait for a log write, so
// "readiness changed" comes first. rep is the drain's report, for
// listeners of the move to Stopped.
func (m *Manager) transition(to State, reason string, rep *drain.Report) error {
	m.transitioning <- struct{}{}
	defer func() { <-m.transitioning }()
	m.mu.Lock()
	from := m.State()
	if !canMove(from, to) {
		m.mu.Unlock()
		return fmt.Errorf("lifecycle: illegal transition %s → %s", from, to)
	}
	if to == Running && m.stopRequested.Err() != nil {
		m.mu.Unlock()
		return fmt.Errorf("lifecycle: not running: stop requested during start-up (%s)", m.stopReason)
	}
	now := time.Now()
	inOld := now.Sub(time.Unix(0, m.stateEnteredAt.Swap(now.UnixNano())))
	if to == Draining { // the flip: what arrives from now on came after it
		m.flip = flip{from: from, at: now}
		m.flip.arrived, _, _ = m.tracker.Arrivals()
	}
	m.state.Store(int32(to))
	listeners := append([]func(Transition){}, m.listeners...)
	m.mu.Unlock()

	t := Transition{From: from, To: to, Reason: reason, At: now, Report: rep}
	for _, fn := range listeners {
		fn(t)
	}
	m.metrics.transition(t)
	m.log.Info("state transition",
		slog.String("service", m.cfg.Service), slog.String("node_id", m.cfg.NodeID),
		slog.String("old_status", from.String()), slog.String("new_status", to.String()),
		slog.String("reason", reason), slog.Float64("duration_ms", msOf(inOld)))
	return nil
}

// flip is the move to Draining as the drain's report measures from it:
// the state it left, when, and the Tracker's arrivals until then.
type flip struct {
	from    State
	at      time.Time
	arrived uint64
}
