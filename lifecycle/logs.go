package lifecycle

import (
	"context"
	"encoding/json"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/drainkit/drainkit/drain"
)

// logPhase logs the hooks of phase that begin, under msg, with the time
// since stoppedAt: the first stop request, as the drain read it under m.mu
// for the report's Start. The key is "phase", as in the report, so the
// two can be matched.
func (m *Manager) logPhase(msg, phase string, hooks int, stoppedAt time.Time) {
	m.log.Info(msg, slog.String("service", m.cfg.Service), slog.String("node_id", m.cfg.NodeID),
		slog.String("phase", phase), slog.Int("hooks", hooks), slog.Float64("elapsed_ms", msOf(time.Since(stoppedAt))))
}

// logPhases wraps hooks so that the first hook of each phase to begin
// logs the phase with its number of hooks, before any of them runs (the
// others wait for that line: sync.Once). Every hook passed AddHook, so
// has a Run. The Flush hooks taken out of the drain (notFlushed) are
// logged skipped where their phase would have begun, before the first
// later phase's line; skippedFlush logs them if no later phase began.
func (m *Manager) logPhases(hooks []drain.Hook, stoppedAt time.Time, notFlushed []drain.HookResult) (_ []drain.Hook, skippedFlush func()) {
	skippedFlush = sync.OnceFunc(func() { m.logPerPhase("drain phase skipped", notFlushed, stoppedAt) })
	type phaseLog struct {
		hooks int
		once  sync.Once
	}
	phases := map[drain.Phase]*phaseLog{}
	for _, h := range hooks {
		if phases[h.Phase] == nil {
			phases[h.Phase] = new(phaseLog)
		}
		phases[h.Phase].hooks++
	}
	out := make([]drain.Hook, len(hooks))
	for i, h := range hooks {
		run, phase, p := h.Run, h.Phase, phases[h.Phase]
		h.Run = func(ctx context.Context) error {
			p.once.Do(func() {
				if phase == drain.Release || phase == drain.Close {
					skippedFlush()
				}
				m.logPhase("drain phase", string(phase), p.hooks, stoppedAt)
			})
			return run(ctx)
		}
		out[i] = h
	}
	return out, skippedFlush
}

// logTiming states, once at start-up, the drain timing in effect: the
// values a drain will use, whatever their source, so that none is a
// surprise at the first SIGTERM.
func (m *Manager) logTiming() {
	attrs := []any{slog.String("service", m.cfg.Service), slog.String("node_id", m.cfg.NodeID),
		slog.String("drain_timeout", m.cfg.DrainTimeout.String()), slog.String("drain_delay", m.cfg.DrainDelay.String())}
	if m.cfg.QuietWindow > 0 {
		attrs = append(attrs, slog.String("drain_quiet_window", m.cfg.QuietWindow.String()),
			slog.String("drain_delay_floor", m.cfg.DelayFloor.String()))
	}
	m.log.Info("drain timing", attrs...)
}

// logHooks says, once the process runs, which hooks each phase of the
// drain will run, in order: a hook the service forgot (a flush, a lease
// hand-off) shows here as an empty phase, not as state lost at the next
// rollout.
func (m *Manager) logHooks() {
	m.mu.Lock()
	byPhase := map[drain.Phase][]string{}
	for _, h := range m.hooks {
		byPhase[h.Phase] = append(byPhase[h.Phase], h.Name)
	}
	m.mu.Unlock()
	attrs := []any{slog.String("service", m.cfg.Service), slog.String("node_id", m.cfg.NodeID)}
	for _, p := range []drain.Phase{drain.StopIntake, drain.WaitInFlight, drain.Flush, drain.Release, drain.Close} {
		attrs = append(attrs, slog.String(string(p), strings.Join(byPhase[p], ",")))
	}
	m.log.Info("drain hooks", attrs...)
}

// logSkipped logs, per phase, the hooks a drain cut short never ran:
// their phase never began, so it had no line of its own.
func (m *Manager) logSkipped(results []drain.HookResult, stoppedAt time.Time) {
	var skipped []drain.HookResult
	for _, r := range results {
		if r.Outcome == drain.Skipped {
			skipped = append(skipped, r)
		}
	}
	m.logPerPhase("drain phase skipped", skipped, stoppedAt)
}

// logAfterDrain logs, per phase, how many results the work after the
// drain (fx's OnStop hooks under fxmodule) added to the report: they ran
// after the drain's own phase lines, and without this line the report
// would list more hooks of a phase than its line said.
func (m *Manager) logAfterDrain(results []drain.HookResult, stoppedAt time.Time) {
	m.logPerPhase("after-drain hooks", results, stoppedAt)
}

// logPerPhase logs msg once per phase of results, in their order, with
// how many results it has.
func (m *Manager) logPerPhase(msg string, results []drain.HookResult, stoppedAt time.Time) {
	var phases []drain.Phase
	count := map[drain.Phase]int{}
	for _, r := range results {
		if count[r.Phase] == 0 {
			phases = append(phases, r.Phase)
		}
		count[r.Phase]++
	}
	for _, p := range phases {
		m.logPhase(msg, string(p), count[p], stoppedAt)
	}
}

// logReport logs the report line: INFO for a clean exit, WARN with the
// advice when work was refused after intake (the delay was too short),
// ERROR for any other exit code. Only the first report is logged, and
// logReport reports whether it was r: a third signal's, which Run logs
// before it returns, is the process's last word, and the drain it did not
// wait for may end before the process does.
func (m *Manager) logReport(r *Report, advice string) (logged bool) {
	if m.reportLogged.Swap(true) {
		return false
	}
	level := slog.LevelInfo
	switch {
	case r.ExitCode != ExitClean:
		level = slog.LevelError
	case advice != "":
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if !m.log.Enabled(ctx, level) {
		return true
	}
	attrs := []slog.Attr{slog.String("service", r.Service), slog.String("node_id", r.NodeID),
		slog.Int("exit_code", r.ExitCode), {Key: "report", Value: r.logValue()}}
	if advice != "" {
		attrs = append(attrs, slog.String("advice", advice))
	}
	reportLogger(m.log).LogAttrs(ctx, level, "drain report", attrs...)
	return true
}

// logValue is the report as one JSON object in a log line: nested under a
// JSON handler, a quoted JSON string under a text handler.
func (r *Report) logValue() slog.Value {
	b, err := json.Marshal(r)
	if err != nil {
		return slog.StringValue("unmarshalable report: " + err.Error())
	}
	return slog.AnyValue(rawJSON(b))
}

// rawJSON is JSON that each slog handler prints in its own way.
type rawJSON []byte

func (j rawJSON) MarshalJSON() ([]byte, error) { return j, nil }
func (j rawJSON) MarshalText() ([]byte, error) { return j, nil }

// builtinHandler is log/slog's own default handler, read before any
// program's main can replace it with slog.SetDefault.
var builtinHandler = slog.Default().Handler()

// reportLogger is the logger for the report line: l, unless l writes
// through slog's built-in default handler. That handler prints text, so
// the report would be one escaped string, which neither jq nor a log
// pipeline reads as an object; the line then goes as JSON to the same
// output. A handler the program chose, text or not, is its choice.
func reportLogger(l *slog.Logger) *slog.Logger {
	if l.Handler() != builtinHandler {
		return l
	}
	return slog.New(slog.NewJSONHandler(log.Writer(), nil))
}
