package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/drainkit/drainkit/drain"
)

// This file is the shutdown in the order it happens: the signals, the stop
// request, the drain, the exit code. docs/shutdown.md says why.

// watchSignals subscribes to SIGTERM and SIGINT (or reads Config.Signals)
// and escalates: the first
// signal requests a stop, the second forces the drain, the third makes
// [Manager.Run] return [ExitForced] at once. unsubscribe stops watching
// and waits for the watcher to end.
func (m *Manager) watchSignals() (unsubscribe func()) {
	signals := m.cfg.Signals
	var osSignals chan os.Signal
	if signals == nil {
		osSignals = make(chan os.Signal, 3)
		signal.Notify(osSignals, syscall.SIGTERM, syscall.SIGINT)
		signals = osSignals
	}
	unsubscribed := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		for n := 1; ; n++ {
			var sig os.Signal
			select {
			case s, ok := <-signals:
				if !ok { // the caller's source ended: no signal will come
					return
				}
				sig = s
			case <-unsubscribed:
				return
			}
			reason := "signal: " + sig.String()
			switch n {
			case 1:
				if m.requestStop(reason) && m.State() == Starting { // the flip waits for the start step: say why
					m.log.Info("stop requested during start-up: the start step's context is cancelled, and the drain follows once it returns",
						"service", m.cfg.Service, "node_id", m.cfg.NodeID, "signal", sig.String())
				}
			case 2:
				if m.State() == Stopped { // nothing left to force: OnDrained's work has budgets of its own
					m.log.Warn("second signal after the drain: the work after it (OnDrained; fx's OnStop hooks) runs to its own timeout; a third signal returns at once",
						"service", m.cfg.Service, "node_id", m.cfg.NodeID, "signal", sig.String())
				} else {
					m.log.Warn("second signal: forcing the drain", "service", m.cfg.Service, "node_id", m.cfg.NodeID, "signal", sig.String())
				}
				m.force(reason + " (second: forced)")
			default:
				m.log.Error("third signal: returning now, without waiting for the drain", "service", m.cfg.Service, "node_id", m.cfg.NodeID,
					"signal", sig.String(), "exit_code", ExitForced)
				m.exitNowOnce.Do(func() { close(m.exitNow) })
				return
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			if osSignals != nil {
				signal.Stop(osSignals)
			}
			close(unsubscribed)
			watcher.Wait()
		})
	}
}

// requestStop asks the process to stop, for reason, and reports whether
// this call was the first. The first wins: its reason is the drain's, and
// the deadline is DrainTimeout from now. [Manager.Run], waiting for it (or
// aborting the start), then calls shutdown.
func (m *Manager) requestStop(reason string) (first bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopRequested.Err() != nil {
		return false
	}
	m.stopRequestedAt, m.stopReason = time.Now(), reason
	m.cancelStopRequested()
	return true
}

// force skips what is left of the drain: hook contexts are cancelled
// (servers are stopped without waiting) and later phases are skipped. A
// force before the drain makes it forced from its start.
func (m *Manager) force(reason string) {
	m.requestStop(reason)
	m.mu.Lock()
	m.forceRequested = true
	cancelDrain := m.cancelDrain
	m.mu.Unlock()
	if cancelDrain != nil {
		cancelDrain()
	}
}

// Shutdown drains the process once. In order, it flips to Draining (the
// transition listeners run first), keeps serving for the propagation delay
// if the process was Running, runs the drain hooks phase by phase, flips to
// Stopped, runs the [Manager.OnDrained] work and logs the [Report], whose
// ExitCode goes to os.Exit. It waits for each hook until the hook's Timeout
// or the deadline, DrainTimeout after the first stop request (or ctx's);
// it does not wait past the deadline (but for the 20 ms [drain.Run] gives
// a hook to return), nor for requests in flight that no hook waits for. Cancelling ctx, like a second signal to [Manager.Run],
// cancels the hooks and skips the phases left (a third signal makes Run
// return without waiting for Shutdown). A later call waits for the first
// one's drain and returns its report (read it with [Manager.Report]
// rather than by calling Shutdown again). A call while Starting with no
// stop requested drains a failed start ([ExitStartFailed]): that is how a
// framework drains from inside its own rollback of a failed start, before
// the rollback closes what the hooks use (package fxmodule does).
func (m *Manager) Shutdown(ctx context.Context, reason string) *Report {
	var startErr error
	if m.requestStop(reason) && m.State() == Starting {
		startErr = errors.New(reason) // nobody asked to stop before: the start failed
	}
	return m.shutdown(ctx, startErr)
}

// shutdown is [Manager.Shutdown] once a stop has been requested, with the
// error of a failed start, if any, for the report. Only the first call
// drains; the others wait for its report.
func (m *Manager) shutdown(ctx context.Context, startErr error) *Report {
	m.shutdownOnce.Do(func() {
		m.report.Store(m.drainAndReport(ctx, startErr))
		close(m.reported)
	})
	return m.report.Load()
}

// Report returns the report of the drain once it has finished, the one
// [Manager.Run] and [Manager.Shutdown] return, or nil before: for code
// that called neither, such as a test helper reading the report of a run
// whose caller only kept the exit code (package fxmoduletest).
func (m *Manager) Report() *Report {
	return m.report.Load()
}

func (m *Manager) drainAndReport(ctx context.Context, startErr error) *Report {
	m.mu.Lock()
	reason, stoppedAt := m.stopReason, m.stopRequestedAt
	m.mu.Unlock()

	_ = m.transition(Draining, reason, nil) // fails only from Stopped, which shutdownOnce rules out
	m.mu.Lock()
	flipped := m.flip
	m.mu.Unlock()
	wasRunning := flipped.from == Running // read at the flip: a start may finish while the stop waits for it

	// The deadline counts from the stop request: the delay is in the budget.
	drainCtx, cancelDeadline := context.WithDeadline(ctx, stoppedAt.Add(m.cfg.DrainTimeout))
	defer cancelDeadline()
	drainCtx, cancelDrain := context.WithCancel(drainCtx)
	defer cancelDrain()
	m.mu.Lock()
	m.cancelDrain = cancelDrain
	forceRequested := m.forceRequested
	hooks := append([]drain.Hook{}, m.hooks...)
	onDrained := append([]func() []drain.HookResult{}, m.onDrained...)
	m.mu.Unlock()
	if forceRequested { // a force before now found no drain to cancel
		cancelDrain()
	}

	if wasRunning { // never ready, never in a load balancer: nothing to wait for
		m.propagationDelay(drainCtx)
	}
	var notFlushed []drain.HookResult
	if !wasRunning {
		why := "the start was aborted, so nothing was served to flush: " + reason
		if startErr != nil {
			why = "the start failed, so nothing was served to flush: " + startErr.Error()
		}
		hooks, notFlushed = withoutFlush(hooks, why)
	}
	hooks, skippedFlush := m.logPhases(hooks, stoppedAt, notFlushed)
	rep := drain.Run(drainCtx, reason, hooks)
	skippedFlush()
	m.logSkipped(rep.Hooks, stoppedAt)
	rep.Hooks = insertAtFlush(rep.Hooks, notFlushed)
	rep.Start, rep.Duration = stoppedAt, time.Since(stoppedAt) // the whole budget, delay included
	_ = m.transition(Stopped, stoppedReason(rep, startErr), rep)
	drained := *rep
	drained.Hooks = slices.Clone(rep.Hooks)
	m.drained.Store(&drained)

	if len(onDrained) > 0 { // the drain is over: what runs now only closes
		var after []drain.HookResult
		for _, fn := range onDrained {
			after = append(after, fn()...)
		}
		rep.Hooks = append(rep.Hooks, after...)
		rep.Duration = time.Since(stoppedAt)
		m.logAfterDrain(after, stoppedAt)
	}
	r := &Report{Report: rep, Service: m.cfg.Service, NodeID: m.cfg.NodeID, ExitCode: exitCode(rep, startErr, len(notFlushed))}
	if startErr != nil {
		r.StartError = startErr.Error()
	}
	m.countArrivals(r, flipped)
	m.metrics.drained(r, wasRunning)
	advice := ""
	if wasRunning && !rep.Forced {
		advice = m.delayAdvice(r)
	}
	m.report.Store(r) // before its line: a third signal from here on returns it rather than a line of its own
	m.logReport(r, advice)
	return r
}

// countArrivals sets r's arrival figures from the tracker: what arrived
// after the flip f, and what intake refused.
func (m *Manager) countArrivals(r *Report, f flip) {
	arrived, refused, last := m.tracker.Arrivals()
	r.ArrivedAfterFlip, r.RefusedAfterIntake = arrived-f.arrived, refused
	if r.ArrivedAfterFlip > 0 { // last is rounded down to the millisecond: never before the flip
		r.LastArrivalAfterFlip = max(last.Sub(f.at), 0)
	}
}

// delayAdvice says what to change when work was refused after intake
// closed: the propagation delay ended before the load balancers stopped
// sending. Empty when nothing was refused.
func (m *Manager) delayAdvice(r *Report) string {
	if r.RefusedAfterIntake == 0 {
		return ""
	}
	last := r.LastArrivalAfterFlip.Round(100 * time.Millisecond)
	if m.cfg.QuietWindow > 0 {
		return fmt.Sprintf("the adaptive delay (%s %s, at most %s %s) ended before this rollout's propagation did: %d requests were refused after intake, the last arrived %s after the flip; raise %s, or %s if the delay ran to it",
			envName("QuietWindow"), m.cfg.QuietWindow, envName("DrainDelay"), m.cfg.DrainDelay, r.RefusedAfterIntake, last,
			envName("QuietWindow"), envName("DrainDelay"))
	}
	return fmt.Sprintf("%s %s was shorter than this rollout's propagation: %d requests were refused after intake, the last arrived %s after the flip; raise %s or use %s",
		envName("DrainDelay"), m.cfg.DrainDelay, r.RefusedAfterIntake, last, envName("DrainDelay"), envName("QuietWindow"))
}

// propagationDelay keeps serving while load balancers notice the flip.
// Fixed, it waits DrainDelay. Adaptive (QuietWindow > 0), it ends once no
// request arrived for QuietWindow, never before DelayFloor, never after
// DrainDelay.
func (m *Manager) propagationDelay(ctx context.Context) {
	if m.cfg.DrainDelay <= 0 {
		return
	}
	start := time.Now()
	end := start.Add(m.cfg.DrainDelay)
	next := end
	for {
		if m.cfg.QuietWindow > 0 {
			next = m.adaptiveEnd(start)
			if next.After(end) {
				next = end
			}
			if !time.Now().Before(next) {
				return
			}
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if !next.Before(end) {
			return
		}
		// An adaptive wake-up: re-check, a request may have arrived meanwhile.
	}
}

// adaptiveEnd is the earliest moment the adaptive delay may end given the
// arrivals seen so far: floor, or a quiet window after the last arrival.
func (m *Manager) adaptiveEnd(start time.Time) time.Time {
	at := start.Add(m.cfg.DelayFloor)
	_, _, last := m.tracker.Arrivals()
	if q := last.Add(m.cfg.QuietWindow); q.After(at) {
		at = q
	}
	return at
}

// withoutFlush takes the Flush hooks out of the drain of a process that
// never ran (its start failed or was aborted), reporting them skipped for
// why. It never served, so it has nothing to flush, and a flush hook
// would write out state that its start may never have loaded: under fx
// every hook is in the graph, whichever OnStart hooks ran. A lease whose
// room is not flushed is left to expire, never released: its next owner
// recovers the room, which is safe whatever the start did.
func withoutFlush(hooks []drain.Hook, why string) ([]drain.Hook, []drain.HookResult) {
	var rest []drain.Hook
	var skipped []drain.HookResult
	for _, h := range hooks {
		if h.Phase != drain.Flush {
			rest = append(rest, h)
			continue
		}
		skipped = append(skipped, drain.HookResult{Name: h.Name, Phase: h.Phase, Outcome: drain.Skipped,
			Error: why})
	}
	return rest, skipped
}

// insertAtFlush puts results of Flush hooks where the report lists that
// phase: after the phases before it, before those after it.
func insertAtFlush(results, flush []drain.HookResult) []drain.HookResult {
	if len(flush) == 0 {
		return results
	}
	at := len(results)
	for i, r := range results {
		if r.Phase == drain.Release || r.Phase == drain.Close {
			at = i
			break
		}
	}
	return slices.Insert(results, at, flush...)
}

// stoppedReason is the Stopped transition's reason: how the drain ended,
// in the order exitCode tells the outcomes apart.
func stoppedReason(rep *drain.Report, startErr error) string {
	switch {
	case rep.Forced:
		return "forced"
	case rep.DeadlineExceeded:
		return "deadline exceeded"
	case startErr != nil:
		return "start failed"
	}
	return "drained"
}

// exitCode is the code for what the drain did, the first that applies:
// forced, out of time, a failed start, a hook that did not end OK, clean.
// The notFlushed Flush hooks of a process that never ran are not failures:
// skipping them is the drain's choice.
func exitCode(rep *drain.Report, startErr error, notFlushed int) int {
	notOK := 0
	for _, h := range rep.Hooks {
		if h.Outcome != drain.OK {
			notOK++
		}
	}
	switch {
	case rep.Forced:
		return ExitForced
	case rep.DeadlineExceeded:
		return ExitDeadline
	case startErr != nil:
		return ExitStartFailed
	case notOK > notFlushed:
		return ExitHookFailed
	}
	return ExitClean
}
