package readiness

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/drainkit/drainkit/lifecycle"
)

// transitions remembers the last status answered, so that exactly one log
// line is written per change however many probes see it at once.
type transitions struct {
	status atomic.Pointer[string]
}

// swap records status and returns the previous one and whether it changed.
func (t *transitions) swap(s string) (old string, changed bool) {
	for {
		p := t.status.Load()
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

func (r *Registry) readyTransition(rep *Report, st lifecycle.State, took time.Duration) {
	if rep.Status != StatusFail && r.state() != lifecycle.Running {
		// The flip came while this probe evaluated: recording its "ok" now
		// would log a fail→ok that never was. The state answer wins.
		return
	}
	old, changed := r.readyStatus.swap(rep.Status)
	if !changed {
		return
	}
	r.metrics.readyStatus.Set(statusValue(rep.Status))
	r.logTransition("readiness changed", rep, old, st, took)
}

func (r *Registry) liveTransition(rep *Report, st lifecycle.State) {
	old, changed := r.liveStatus.swap(rep.Status)
	if !changed {
		return
	}
	r.metrics.liveStatus.Set(statusValue(rep.Status))
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
