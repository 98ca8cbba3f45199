package readiness

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainkit/drainkit/lifecycle"
)

// transitions remembers the last status answered, so that exactly one log
// line is written per change however many probes see it at once.
type transitions struct {
	status atomic.Pointer[string]
}

// swap records s and returns the previous status and whether it changed.
// With admit, s is recorded only while admit() holds, read after the
// previous status was: a writer that changes what admit reads before it
// swaps (the flip: the state, then OnTransition) is never overwritten.
func (t *transitions) swap(s string, admit func() bool) (old string, changed bool) {
	for {
		p := t.status.Load()
		if admit != nil && !admit() {
			return "", false
		}
		if p != nil && *p == s {
			return s, false
		}
		if t.status.CompareAndSwap(p, &s) {
			if p == nil {
				return "unknown", true
			}
			return *p, true
		}
	}
}

// record sets g from the status now current, and again if it changed
// meanwhile: of concurrent recorders, the last status swapped in wins.
func (t *transitions) record(g prometheus.Gauge) {
	for {
		p := t.status.Load()
		g.Set(statusValue(*p))
		if t.status.Load() == p {
			return
		}
	}
}

func (r *Registry) readyTransition(rep *Report, st lifecycle.State, took time.Duration) {
	var admit func() bool
	if rep.Status != StatusFail {
		// The flip may come while this probe evaluates: recording its "ok"
		// after the flip's fail would log a fail→ok that never was, and
		// leave the gauge at ready. The state answer wins.
		admit = func() bool { return r.state() == lifecycle.Running }
	}
	old, changed := r.readyStatus.swap(rep.Status, admit)
	if !changed {
		return
	}
	r.readyStatus.record(r.metrics.readyStatus)
	r.logTransition("readiness changed", rep, old, st, took)
}

func (r *Registry) liveTransition(rep *Report, st lifecycle.State) {
	old, changed := r.liveStatus.swap(rep.Status, nil)
	if !changed {
		return
	}
	r.liveStatus.record(r.metrics.liveStatus)
	r.logTransition("liveness changed", rep, old, st, 0)
}

func (r *Registry) logTransition(msg string, rep *Report, old string, st lifecycle.State, took time.Duration) {
	failed := rep.failed()
	reason := rep.Reason
	if reason == "" && len(failed) > 0 {
		for _, c := range rep.Checks {
			if c.Name == failed[0] {
				reason = c.Message
			}
		}
	}
	r.cfg.Logger.LogAttrs(context.Background(), transitionLevel(rep.Status, st), msg,
		slog.String("service", r.cfg.Service),
		slog.String("node_id", r.cfg.NodeID),
		slog.String("old_status", old),
		slog.String("new_status", rep.Status),
		slog.String("failed_check", strings.Join(failed, ",")),
		slog.String("reason", reason),
		slog.Int64("duration_ms", took.Milliseconds()),
	)
}

// transitionLevel keeps Error for failures an operator must look at: while
// starting or draining, not ready is expected and logged at Info.
func transitionLevel(s string, st lifecycle.State) slog.Level {
	switch {
	case st != lifecycle.Running:
		return slog.LevelInfo
	case s == StatusFail:
		return slog.LevelError
	case s == StatusDegraded:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// statusValue is the gauge value of a status: 1 serving, 0 not.
func statusValue(s string) float64 {
	if s == StatusFail {
		return 0
	}
	return 1
}

// OnTransition records the readiness status a lifecycle transition
// implies at once (the gauge and the one transition log line), instead of
// at the next probe, and at the flip to Running starts the clock that
// heartbeats are judged by (see [Registry.Heartbeat]), so that a pause
// before the first live probe is not counted either. Register it with the
// lifecycle manager's OnTransition; it does no I/O beyond the log line.
func (r *Registry) OnTransition(t lifecycle.Transition) {
	if r.notNew() {
		return // its probes say what is wrong; a listener must not panic the flip
	}
	r.stateReport()
	if t.To == lifecycle.Running {
		r.mu.Lock()
		r.watchClockLocked()
		r.mu.Unlock()
	}
}
