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

// Run runs hooks phase by phase and returns what happened. The hooks of
// one phase run concurrently, each with a context that ends at min(its
// Timeout, ctx's deadline), and Run waits for a hook only while that
// context lives, and 20 ms more for it to return: one that ignores it is
// abandoned, reported TimedOut with its stack. Cancelling ctx forces the drain: running hooks are given up on
// (Canceled) and later phases Skipped. A hook that fails [Hook.Validate] is
// reported Failed and never runs. A failed hook does not stop the drain:
// leaving a later phase out (closing clients) would be worse. A drain cut
// short calls every hook's Abort, last first, before Run returns.
func Run(ctx context.Context, reason string, hooks []Hook) *Report {
	r := &Report{Reason: reason, Start: time.Now(), Hooks: make([]HookResult, 0, len(hooks))}
	// Names need not be unique here, so results are matched by position.
	resultIndex := make([]int, len(hooks)) // hooks[i]'s result is r.Hooks[resultIndex[i]]
	for _, p := range phases {
		var batch []Hook
		for i, h := range hooks {
			if h.Phase == p {
				resultIndex[i] = len(r.Hooks) + len(batch)
				batch = append(batch, h)
			}
		}
		if len(batch) == 0 {
			continue
		}
		if ctx.Err() != nil {
			for _, h := range batch {
				res := HookResult{Name: h.Name, Phase: p, Outcome: Skipped, Error: cutReason(ctx)}
				if err := h.Validate(); err != nil { // a mistake is reported as such, run or not
					res.Outcome, res.Error = Failed, err.Error()
				}
				r.Hooks = append(r.Hooks, res)
			}
			continue
		}
		r.Hooks = append(r.Hooks, runPhase(ctx, batch)...)
	}
	for i, h := range hooks { // hooks of an undefined phase would otherwise vanish from the report
		if !h.Phase.valid() {
			resultIndex[i] = len(r.Hooks)
			r.Hooks = append(r.Hooks, HookResult{Name: h.Name, Phase: h.Phase, Outcome: Failed, Error: h.Validate().Error()})
		}
	}
	if ctx.Err() != nil {
		abort(hooks, resultIndex, r)
	}
	streamReports(hooks, resultIndex, r)
	r.Duration = time.Since(r.Start)
	r.DeadlineExceeded = errors.Is(ctx.Err(), context.DeadlineExceeded)
	r.Forced = errors.Is(ctx.Err(), context.Canceled)
	return r
}

func cutReason(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "drain deadline passed before this phase"
	}
	return "drain forced before this phase"
}

// abort calls the Abort of every hook, last first, recording a panic in
// the hook's result rather than letting it end the drain.
func abort(hooks []Hook, resultIndex []int, r *Report) {
	for i := len(hooks) - 1; i >= 0; i-- {
		h := hooks[i]
		if h.Abort == nil {
			continue
		}
		func() {
			defer func() {
				if v := recover(); v != nil {
					r.abortPanicked(resultIndex[i], fmt.Sprint(v))
				}
			}()
			h.Abort()
		}()
	}
}

// streamReports copies each stream hook's report into its result, after
// Abort, so that streams closed by it are counted.
func streamReports(hooks []Hook, resultIndex []int, r *Report) {
	for i, h := range hooks {
		if h.streams != nil {
			r.Hooks[resultIndex[i]].Streams = h.streams()
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

// returnGrace is how long a hook whose context ended has to return before
// it is abandoned: one that honours its context needs a moment to be
// scheduled and return, and reported abandoned, with its stack, it would
// read as one that ignored it, its own error lost. A drain with a hung
// hook so ends this much after its deadline.
const returnGrace = 20 * time.Millisecond

// errGoexit is the error of a hook whose goroutine ended in
// runtime.Goexit (t.FailNow in a test) rather than returning: it ended,
// and is not waited for.
var errGoexit = errors.New("drain: hook exited without returning (runtime.Goexit)")

// hookReturn is how a hook's Run returned, sent to runHook.
type hookReturn struct {
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
	returned := make(chan hookReturn, 1) // buffered: an abandoned hook must still be able to finish
	gid := make(chan uint64, 1)
	go func() {
		gid <- goroutineID()
		ret := hookReturn{err: errGoexit} // unless Run returns or panics
		defer func() {
			if v := recover(); v != nil {
				ret = hookReturn{panicked: v, stack: debug.Stack()}
			}
			returned <- ret
		}()
		ret = hookReturn{err: h.Run(ctx)}
	}()

	var ret hookReturn
	select {
	case ret = <-returned:
	case <-ctx.Done():
		ended := time.Since(start)
		grace := time.NewTimer(returnGrace)
		defer grace.Stop()
		select {
		case ret = <-returned: // it returned as its context ended: say how, not that it was abandoned
		case <-grace.C:
			res.Duration = ended // it ran until its context ended, the grace aside
			res.Outcome = cutShort(ctx)
			res.Error = "abandoned: " + context.Cause(ctx).Error()
			res.Stack = goroutineStack(<-gid)
			return res
		}
	}
	res.Duration = time.Since(start)
	switch {
	case ret.panicked != nil:
		res.Outcome, res.Error, res.Stack = Panicked, fmt.Sprint(ret.panicked), string(ret.stack)
	case ret.err == nil:
		res.Outcome = OK
	case ctx.Err() != nil:
		res.Outcome, res.Error = cutShort(ctx), ret.err.Error()
	default:
		res.Outcome, res.Error = Failed, ret.err.Error()
	}
	return res
}

// cutShort is the outcome of a hook whose context ended while it ran:
// Canceled if forced, TimedOut if a budget ran out, whichever came first.
func cutShort(ctx context.Context) Outcome {
	if errors.Is(ctx.Err(), context.Canceled) {
		return Canceled
	}
	return TimedOut
}

// goroutineID parses the current goroutine's id from its stack header
// ("goroutine 42 [running]:"), to find an abandoned hook's stack later.
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
