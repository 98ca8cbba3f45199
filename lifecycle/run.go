package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drainkit/drainkit/drain"
)

// Run is the whole life of a process without a framework: it handles
// signals, runs the OnStart steps, marks the process Running, waits for a
// signal or for ctx to end, drains ([Manager.Shutdown]) and returns the
// report, whose ExitCode goes to os.Exit. Signals are handled from the
// call on: one that comes before it (slow set-up between New and Run) ends
// the process as Go's default does, so do such work in an OnStart step. A
// signal during start-up cancels
// the step that is running, skips the rest, and drains the hooks the
// started steps had added, but runs no Flush hook (reported skipped:
// nothing was served, and the state to flush may never have been loaded);
// a step that fails does the same, and the report carries StartError and
// [ExitStartFailed].
//
// A third signal makes Run return at once, with [ExitForced] and a report
// of no hooks, or of the drain's hooks if its phases were over (logged as
// every report is; the drain's own report, and its exit code, if the drain
// had made it already), while the drain or the work after it goes on in the
// background: the caller is to exit (os.Exit), which ends it. Run itself
// never ends the process. A process has one life: a second call starts
// nothing (its start steps would run beside the first's) and returns the
// first's report once there is one, or, if its ctx ends or a third signal
// comes first, a report with [ExitForced] that says so.
func (m *Manager) Run(ctx context.Context) *Report {
	if m.runCalled.Swap(true) {
		m.log.Warn("Run called again: it starts nothing and returns the first Run's report", "service", m.cfg.Service, "node_id", m.cfg.NodeID)
		select {
		case <-m.reported:
			return m.Report()
		case <-ctx.Done():
		case <-m.exitNow:
		}
		rep := &drain.Report{Reason: "Run called again: it returned before the first Run's drain ended", Forced: true}
		return &Report{Report: rep, Service: m.cfg.Service, NodeID: m.cfg.NodeID, ExitCode: ExitForced}
	}
	m.logTiming()
	unsubscribe := m.watchSignals()
	defer unsubscribe()
	stopWatchingCtx := context.AfterFunc(ctx, func() { m.requestStop("context: " + context.Cause(ctx).Error()) })
	defer stopWatchingCtx()

	done := make(chan *Report, 1)
	go func() { done <- m.live() }()
	select {
	case r := <-done:
		return r
	case <-m.exitNow:
		select {
		case r := <-done: // the drain ended as the third signal came: its report is logged already
			return r
		default:
		}
		if r := m.Report(); r != nil { // the drain's report, logged or about to be: on its way to done
			return r
		}
		m.mu.Lock()
		at, reason := m.stopRequestedAt, m.stopReason
		m.mu.Unlock()
		rep := &drain.Report{Reason: reason + " (third signal: not waited for)", Start: at, Forced: true}
		if !at.IsZero() {
			rep.Duration = time.Since(at) // how long it ran before the third signal
		}
		if d := m.drained.Load(); d != nil { // the phases are over: their results stand, the work after them is cut
			c := *d
			c.Reason += " (third signal: the work after the drain not waited for)"
			rep = &c
		}
		r := &Report{Report: rep, Service: m.cfg.Service, NodeID: m.cfg.NodeID, ExitCode: ExitForced}
		if !m.logReport(r, "") { // the drain's report came first (stored before its line): return it, so the line and the exit code agree
			return m.Report()
		}
		return r // a log pipeline that reads the report line still gets one
	}
}

// live is Run's start, wait and drain.
func (m *Manager) live() *Report {
	err := m.start()
	switch {
	case errors.Is(err, errStartAborted):
		err = nil // a stop request cut the start short: a clean stop, not a failed start
	case err != nil:
		m.requestStop("start failed: " + err.Error())
	default:
		if m.markRunning() == nil { // else a stop was requested first
			<-m.stopRequested.Done()
		}
	}
	return m.shutdown(context.Background(), err)
}

// start runs the OnStart steps with a context cancelled by a stop request.
func (m *Manager) start() error {
	m.mu.Lock()
	steps := append([]func(context.Context) error{}, m.startSteps...)
	m.mu.Unlock()
	ctx, cancel := context.WithCancel(m.stopRequested)
	defer cancel()
	for i, step := range steps {
		if m.stopRequested.Err() != nil {
			return errStartAborted
		}
		if err := step(ctx); err != nil {
			// Aborted only when the step gave up because of the stop
			// request; one that failed on its own (even if its failure
			// itself requested a stop, as a framework's rollback does)
			// is a failed start.
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				return errStartAborted
			}
			return fmt.Errorf("lifecycle: start step %d: %w", i+1, err)
		}
	}
	return nil
}

// errStartAborted marks a start step cut short by a stop request.
var errStartAborted = errors.New("lifecycle: start aborted by a stop request")
