package readiness

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drainkit/drainkit/lifecycle"
)

// transitions remembers the last status answered, so that exactly one log
// line is written per change however many probes see it at once.
type transitions struct {
	mu   sync.Mutex             // one change at a time, told (gauge, log line) before the next
	last atomic.Pointer[answer] // written under mu; read without it when nothing changes
}

// answer is a status, whether it was answered while starting, and whether
// it came from an evaluation of the checks: a start that ends not ready is
// a change, from "fail: starting" to "fail: a check", whose line names the
// check; a start that ends in a drain or Close is no change.
type answer struct {
	status               string
	starting, evaluation bool
}

// differs reports whether a is a change from p, the last answer recorded.
func (a answer) differs(p *answer) bool {
	return p == nil || p.status != a.status || p.starting && a.evaluation
}

// change records a and calls tell with the status it replaces, if a
// differs from it and admit (if set) holds. admit is read under the lock:
// a writer that changes what admit reads before it records its own change
// (the flip: the state, then OnTransition) is never overwritten by a
// change admitted earlier. So the last line and the gauge are the status
// held. The lock is held across tell's log write, as the logger's own is.
func (t *transitions) change(a answer, admit func() bool, tell func(old string)) {
	// The usual probe: no change, no lock. Not a state's answer (admit
	// nil: the flip, Close), which must come after a change whose admit
	// read the state before the flip wrote it and that is being recorded
	// under the lock now: read without it, the last status is the one
	// that change replaces, and the flip would see no change.
	if admit != nil && !a.differs(t.last.Load()) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.last.Load()
	if !a.differs(p) || admit != nil && !admit() {
		return
	}
	old := "unknown"
	if p != nil {
		old = p.status
	}
	t.last.Store(&a)
	tell(old)
}

// answeredFrom notes that a probe answers from ev: no probe that answers
// from an older evaluation records its status after this one.
func (r *Registry) answeredFrom(ev *evaluation) {
	for {
		cur := r.answered.Load()
		if ev.seq <= cur || r.answered.CompareAndSwap(cur, ev.seq) {
			return
		}
	}
}

// readyTransition records rep's status; ev is the evaluation it was read
// from, nil for a state's answer (the flip, Close).
func (r *Registry) readyTransition(rep *Report, st lifecycle.State, took time.Duration, ev *evaluation) {
	var admit func() bool
	if ev != nil {
		// The flip (or Close) may come while this probe evaluates:
		// recording its "ok" after the flip's fail would log a fail→ok
		// that never was, and leave the gauge at ready. The state wins.
		// So does a newer evaluation another probe answered from while
		// this one, answering from an older, was held up.
		admit = func() bool {
			return ev.seq >= r.answered.Load() && (rep.Status == StatusFail || r.state() == lifecycle.Running && !r.closed.Load())
		}
	}
	r.readyStatus.change(answer{rep.Status, st == lifecycle.Starting, ev != nil}, admit, func(old string) {
		r.metrics.readyStatus.Set(statusValue(rep.Status))
		r.logTransition("readiness changed", rep, old, st, took)
	})
}

func (r *Registry) liveTransition(rep *Report, st lifecycle.State) {
	r.liveStatus.change(answer{status: rep.Status}, nil, func(old string) {
		r.metrics.liveStatus.Set(statusValue(rep.Status))
		r.logTransition("liveness changed", rep, old, st, 0)
	})
}

func (r *Registry) logTransition(msg string, rep *Report, old string, st lifecycle.State, took time.Duration) {
	failed := rep.failed()
	reason := rep.Reason
	if reason == "" && len(failed) > 0 {
		// One failed check: its message. More: each named with its own,
		// so no failure hides behind the first one's.
		message := func(name string) string {
			for _, c := range rep.Checks {
				if c.Name == name {
					return c.Message
				}
			}
			return ""
		}
		reason = message(failed[0])
		if len(failed) > 1 {
			msgs := make([]string, len(failed))
			for i, name := range failed {
				msgs[i] = name + ": " + message(name)
			}
			reason = strings.Join(msgs, "; ")
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
		r.logChecks()
	}
}

// logChecks says, once the process runs, what its probes judge: the
// checks by tier and the heartbeats with their longest gap, so that a
// check that was never added, or one added to the wrong tier, shows
// before the first outage it should have caught, or not caught.
func (r *Registry) logChecks() {
	var gating, informational, heartbeats []string
	r.mu.Lock()
	for _, e := range r.entries {
		if e.check.Tier == Informational {
			informational = append(informational, e.check.Name)
		} else {
			gating = append(gating, e.check.Name)
		}
	}
	for _, h := range r.heartbeats {
		heartbeats = append(heartbeats, h.name+"("+h.maxGap.String()+")")
	}
	r.mu.Unlock()
	r.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "readiness checks",
		slog.String("service", r.cfg.Service), slog.String("node_id", r.cfg.NodeID),
		slog.String("gating", strings.Join(gating, ",")), slog.String("informational", strings.Join(informational, ",")),
		slog.String("heartbeats", strings.Join(heartbeats, ",")))
}
