package fxmodule

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
)

// hookLifecycle is the fx.Lifecycle that every constructor of an app run
// by [Run] is given: Run decorates fx.Lifecycle at the root, and fx
// applies a root decoration to every module. It wraps each hook that is
// appended, so that
//   - the first OnStop hook fx runs drains first if nobody has: that is a
//     failed start's rollback, which must not close what the drain hooks
//     still use, and whose hooks then get fx's StopTimeout from the drain's
//     end;
//   - an OnStart hook's error becomes the reason of that drain, and no
//     OnStart hook begins once a stop was requested during the start;
//   - each OnStop hook's outcome joins the drain report;
//   - a hook's panic is recovered, as a drain hook's is: fx runs hooks on
//     goroutines of its own, where it would end the process unreported.
//     An OnStart hook's fails the start; an OnStop hook's is its outcome.
//
// This is how Run learns what fx does without reading fx's event log,
// which is not fx's API.
type hookLifecycle struct {
	fx.Lifecycle
	d *driver
}

// Append wraps h as the type's comment says and appends it.
func (l hookLifecycle) Append(h fx.Hook) {
	by := appendedBy()
	name := "fx.OnStop " + by
	if start := h.OnStart; start != nil {
		h.OnStart = func(ctx context.Context) (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("fx.OnStart %s panicked: %v\n%s", by, v, debug.Stack())
				}
				if err != nil {
					l.d.startFailed(err)
				}
			}()
			if abort := l.d.abortContext(); abort != nil && abort.Err() != nil {
				// A stop request (or fx's StartTimeout) came while an earlier
				// hook ran: the start is aborted, and fx rolls back what began.
				return fmt.Errorf("fx.OnStart %s not run: %w", by, abort.Err())
			}
			return start(ctx)
		}
	}
	if stop := h.OnStop; stop != nil {
		index := l.d.stops.add(name)
		h.OnStop = func(ctx context.Context) error {
			ctx, cancel := l.d.drainBeforeRollback(ctx)
			defer cancel()
			return l.d.stops.run(ctx, index, stop)
		}
	}
	l.Lifecycle.Append(h)
}

// appendedBy names the function that called Append, for the report: a
// label for people, which nothing matches on.
func appendedBy() string {
	pc := make([]uintptr, 1)
	if runtime.Callers(3, pc) == 0 { // runtime.Callers, appendedBy, Append
		return "(unknown)"
	}
	f, _ := runtime.CallersFrames(pc).Next()
	return f.Function
}

// stopResults notes how each OnStop hook of one app.Stop ended.
type stopResults struct {
	mu       sync.Mutex
	appended []string   // every OnStop hook's name, in the order appended
	ran      []*stopRun // in the order they began
}

type stopRun struct {
	index int // in appended
	began time.Time
	res   *drain.HookResult // nil while it runs
}

// add notes an OnStop hook appended and returns its index for run.
func (s *stopResults) add(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appended = append(s.appended, name)
	return len(s.appended) - 1
}

// run runs the OnStop hook appended at index and notes its outcome.
func (s *stopResults) run(ctx context.Context, index int, stop func(context.Context) error) error {
	r := &stopRun{index: index, began: time.Now()}
	s.mu.Lock()
	s.ran = append(s.ran, r)
	name := s.appended[index]
	s.mu.Unlock()
	var panicked any
	var stack []byte
	err := func() error {
		defer func() {
			if panicked = recover(); panicked != nil {
				stack = debug.Stack()
			}
		}()
		return stop(ctx)
	}()
	res := drain.HookResult{Name: name, Phase: drain.Close, Outcome: drain.OK, Start: r.began, Duration: time.Since(r.began)}
	switch {
	case panicked != nil:
		res.Outcome, res.Error, res.Stack = drain.Panicked, fmt.Sprint(panicked), string(stack)
		err = fmt.Errorf("%s panicked: %v", name, panicked)
	case err != nil:
		res.Outcome, res.Error = drain.Failed, err.Error()
	}
	s.mu.Lock()
	r.res = &res
	s.mu.Unlock()
	return err
}

// take returns how the OnStop hooks that began since the last take ended;
// a hook still running (fx gave up on it when its budget ended, stopErr)
// is TimedOut. When the budget ended (budgetEnded), the hooks fx never
// began are Skipped, in the order fx would have run them (last appended
// first): a client never closed shows in the report.
func (s *stopResults) take(stopErr error, budgetEnded bool) []drain.HookResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]drain.HookResult, 0, len(s.appended))
	began := make([]bool, len(s.appended))
	for _, r := range s.ran {
		began[r.index] = true
		if r.res != nil {
			out = append(out, *r.res)
			continue
		}
		out = append(out, drain.HookResult{Name: s.appended[r.index], Phase: drain.Close, Outcome: drain.TimedOut,
			Start: r.began, Duration: time.Since(r.began), Error: fmt.Sprintf("abandoned at the end of the OnStop budget: %v", stopErr)})
	}
	for i := len(s.appended) - 1; i >= 0 && budgetEnded; i-- {
		if !began[i] {
			out = append(out, drain.HookResult{Name: s.appended[i], Phase: drain.Close, Outcome: drain.Skipped,
				Error: "not begun: fx's StopTimeout ended first"})
		}
	}
	s.ran = nil
	return out
}
