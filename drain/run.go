package drain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"golang.org/x/sync/errgroup"
)

// Run runs hooks phase by phase and returns what happened.
//
// Phases run in order; the hooks of one phase run concurrently and the next
// phase starts when each of them has returned or been given up on. Each hook
// gets a context that ends at min(its Timeout, ctx's deadline). Run waits for
// a hook only while that context lives: a hook that ignores its context is
// abandoned (left running, reported TimedOut with its stack), so Run returns
// by ctx's deadline whatever the hooks do.
//
// Cancelling ctx forces the drain: running hooks see their contexts cancelled
// and are given up on at once (Canceled), and hooks of later phases are
// Skipped. A hook
// with an empty Name, a Phase that is not one of the five, a negative
// Timeout or a nil Run is reported Failed, naming the field, and never runs. When the drain was
// cut short (forced or out of time), Run calls every hook's Abort, in
// reverse order, before it returns. Run does not stop at
// a failed hook: a hook's error says nothing about whether the next phase
// should run, and leaving a phase out (say, closing clients) is worse.
func Run(ctx context.Context, reason string, hooks []Hook, opts ...Option) *Report {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	r := &Report{Reason: reason, Start: time.Now(), Hooks: make([]HookResult, 0, len(hooks))}
	// result[i] is the index in r.Hooks of hooks[i]'s result: names need
	// not be unique here, so results are matched to hooks by position.
	result := make([]int, len(hooks))
	for _, p := range phases {
		var batch []Hook
		for i, h := range hooks {
			if h.Phase == p {
				result[i] = len(r.Hooks) + len(batch)
				batch = append(batch, h)
			}
		}
		if len(batch) == 0 {
			continue
		}
		if ctx.Err() != nil {
			for _, h := range batch {
				r.Hooks = append(r.Hooks, HookResult{Name: h.Name, Phase: p, Outcome: Skipped, Error: cutReason(ctx)})
			}
			continue
		}
		if o.onPhase != nil {
			o.onPhase(p, len(batch))
		}
		r.Hooks = append(r.Hooks, runPhase(ctx, batch)...)
	}
	for i, h := range hooks { // hooks of an undefined phase would otherwise vanish from the report
		if !h.Phase.valid() {
			result[i] = len(r.Hooks)
			r.Hooks = append(r.Hooks, HookResult{Name: h.Name, Phase: h.Phase, Outcome: Failed, Error: h.Validate().Error()})
		}
	}
	if ctx.Err() != nil {
		abort(hooks, result, r)
	}
	streamReports(hooks, result, r)
	r.Duration = time.Since(r.Start)
	r.DeadlineExceeded = errors.Is(ctx.Err(), context.DeadlineExceeded)
	r.Forced = errors.Is(ctx.Err(), context.Canceled)
	return r
}

// An Option changes how [Run] drains. Options are for the rare caller
// that watches a drain as it goes (package lifecycle logs each phase);
// the hooks themselves never see them.
type Option func(*options)

type options struct {
	onPhase func(p Phase, hooks int)
}

// OnPhase makes [Run] call fn as each phase that has hooks begins, with
// the phase and the number of its hooks, before any of them runs. A phase
// that is skipped because the drain was cut short does not begin. fn runs
// on Run's goroutine and must not block: the phase waits for it.
func OnPhase(fn func(p Phase, hooks int)) Option {
	return func(o *options) { o.onPhase = fn }
}

func cutReason(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "drain deadline passed before this phase"
	}
	return "drain forced before this phase"
}

// abort calls the Abort of every hook, last first, recording a panic in
// the hook's result (hooks[i]'s is r.Hooks[result[i]]) rather than letting
// it end the drain.
func abort(hooks []Hook, result []int, r *Report) {
	for i := len(hooks) - 1; i >= 0; i-- {
		h := hooks[i]
		if h.Abort == nil {
			continue
		}
		func() {
			defer func() {
				if v := recover(); v != nil {
					r.abortPanicked(result[i], fmt.Sprint(v))
				}
			}()
			h.Abort()
		}()
	}
}

// streamReports copies each stream hook's report into its result
// (hooks[i]'s is r.Hooks[result[i]]), after Abort, so that streams closed
// by it are counted.
func streamReports(hooks []Hook, result []int, r *Report) {
	for i, h := range hooks {
		if h.streams != nil {
			r.Hooks[result[i]].Streams = h.streams()
		}
	}
}

func runPhase(ctx context.Context, batch []Hook) []HookResult {
	results := make([]HookResult, len(batch))
	var g errgroup.Group
	for i, h := range batch {
		g.Go(func() error {
			results[i] = runHook(ctx, h)
			return nil
		})
	}
	_ = g.Wait() // runHook reports into results; it never returns an error
	return results
}

// done carries a hook's return to runHook.
type done struct {
	err      error
	panicked any
	stack    []byte
}

func runHook(parent context.Context, h Hook) HookResult {
	res := HookResult{Name: h.Name, Phase: h.Phase}
	if err := h.Validate(); err != nil {
		res.Outcome, res.Error = Failed, err.Error()
		return res
	}
	ctx, cancel := parent, context.CancelFunc(func() {})
	if h.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, h.Timeout)
	}
	defer cancel()

	start := time.Now()
	res.Start = start
	ch := make(chan done, 1) // buffered: an abandoned hook must still be able to finish
	gid := make(chan uint64, 1)
	go func() {
		gid <- goroutineID()
		defer func() {
			if v := recover(); v != nil {
				ch <- done{panicked: v, stack: debug.Stack()}
			}
		}()
		ch <- done{err: h.Run(ctx)}
	}()

	var d done
	select {
	case d = <-ch:
	case <-ctx.Done():
		select {
		case d = <-ch: // it returned as its context ended: say how, not that it was abandoned
		default:
			res.Duration = time.Since(start)
			res.Outcome = cutShort(ctx)
			res.Error = "abandoned: " + context.Cause(ctx).Error()
			res.Stack = goroutineStack(<-gid)
			return res
		}
	}
	res.Duration = time.Since(start)
	switch {
	case d.panicked != nil:
		res.Outcome, res.Error, res.Stack = Panicked, fmt.Sprint(d.panicked), string(d.stack)
	case d.err == nil:
		res.Outcome = OK
	case ctx.Err() != nil:
		res.Outcome, res.Error = cutShort(ctx), d.err.Error()
	default:
		res.Outcome, res.Error = Failed, d.err.Error()
	}
	return res
}

// cutShort is the outcome of a hook whose context ended while it ran:
// Canceled when the drain was forced, TimedOut when a budget ran out. The
// hook's own context tells which came first, its Timeout or the force.
func cutShort(ctx context.Context) Outcome {
	if errors.Is(ctx.Err(), context.Canceled) {
		return Canceled
	}
	return TimedOut
}

// goroutineID parses the current goroutine's id from its stack header
// ("goroutine 42 [running]:"); it is only used to find an abandoned hook's
// stack in a full dump.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// goroutineStack returns the stack of goroutine id, or "" if it has ended.
func goroutineStack(id uint64) string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	head := []byte(fmt.Sprintf("goroutine %d [", id))
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.HasPrefix(block, head) {
			return string(block)
		}
	}
	return ""
}
