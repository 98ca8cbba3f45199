package fxmodule

import (
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"sync"
	"time"

	"go.uber.org/fx/fxevent"

	"github.com/drainkit/drainkit/drain"
)

// stopRecorder logs fx's events through slog and notes how each OnStop
// hook ended, for the drain report: fx names hooks only in its events.
type stopRecorder struct {
	next       fxevent.Logger // set when fx builds the logger
	onRollback func(error)    // told why fx rolls a start back

	mu      sync.Mutex
	running map[string]time.Time // OnStop hooks that began and have not ended
	ended   []drain.HookResult
}

// LogEvent logs e and records OnStop hooks beginning and ending.
func (r *stopRecorder) LogEvent(e fxevent.Event) {
	r.next.LogEvent(e)
	if e, ok := e.(*fxevent.RollingBack); ok && r.onRollback != nil {
		r.onRollback(e.StartErr)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e := e.(type) {
	case *fxevent.OnStopExecuting:
		if e.CallerName == wireName {
			return // Module's own hook: the drain, which the report already has
		}
		if r.running == nil {
			r.running = map[string]time.Time{}
		}
		r.running[e.FunctionName] = time.Now()
	case *fxevent.OnStopExecuted:
		if _, ok := r.running[e.FunctionName]; !ok {
			return
		}
		delete(r.running, e.FunctionName)
		res := drain.HookResult{Name: "fx.OnStop " + e.FunctionName, Phase: drain.Close, Outcome: drain.OK, Duration: e.Runtime}
		if e.Err != nil {
			res.Outcome, res.Error = drain.Failed, e.Err.Error()
		}
		r.ended = append(r.ended, res)
	}
}

// results returns how the OnStop hooks of one app.Stop ended; a hook
// still running when Stop gave up is TimedOut. Without events (an
// fx.WithLogger replaced the recorder) the whole Stop is one result.
func (r *stopRecorder) results(stopErr error, took time.Duration) []drain.HookResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.ended
	r.ended = nil
	if stopErr != nil && len(r.running) > 0 {
		for name, began := range r.running {
			out = append(out, drain.HookResult{Name: "fx.OnStop " + name, Phase: drain.Close,
				Outcome: drain.TimedOut, Duration: time.Since(began),
				Error: fmt.Sprintf("abandoned at the end of the OnStop budget: %v", stopErr)})
		}
		r.running = nil
	}
	if r.next == nil && len(out) == 0 {
		res := drain.HookResult{Name: "fx.OnStop", Phase: drain.Close, Outcome: drain.OK, Duration: took}
		if stopErr != nil {
			res.Outcome, res.Error = drain.Failed, stopErr.Error()
		}
		out = append(out, res)
	}
	return out
}

// wireName is how fx's events name the function that appends Module's own
// hook (their CallerName); the hook's function name depends on inlining.
var wireName = runtime.FuncForPC(reflect.ValueOf(wire).Pointer()).Name()

// slogEvents is fx's event logger writing to the graph's *slog.Logger.
func slogEvents(p loggerParams) fxevent.Logger {
	l := p.Logger
	if l == nil {
		l = slog.Default()
	}
	fl := &fxevent.SlogLogger{Logger: l}
	fl.UseLogLevel(slog.LevelDebug)
	return fl
}
