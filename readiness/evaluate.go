package readiness

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// entry is a registered check and its run in progress, if any.
type entry struct {
	check Check
	// running is the Probe call in progress, guarded by Registry.mu. A check
	// that ignores its context stays here until it returns, so later
	// evaluations wait on it instead of starting it again: a hung check
	// costs one goroutine, once.
	running *execution
}

// execution is one call of a check's Probe.
type execution struct {
	created time.Time     // when an evaluation asked for it; guarded by Registry.mu
	begun   chan struct{} // closed once started is set
	started time.Time     // when its goroutine called Probe
	done    chan struct{} // closed after err and finished are set
	err     error
	finish  time.Time
}

// probeStarting runs in an execution's goroutine just before it reads the
// clock and calls Probe; tests replace it to model a goroutine that the
// scheduler runs late.
var probeStarting = func(name string) {}

// evaluation is the result of running every check once.
type evaluation struct {
	seq      uint64    // one above the evaluation that landed before it
	at       time.Time // when it completed
	duration time.Duration
	results  []result
	failing  bool // a gating check failed: the results are kept for less long
}

type result struct {
	name     string
	tier     Tier
	err      error // nil when ok; message already short and redacted
	duration time.Duration
	at       time.Time
}

// evaluate runs every registered check concurrently, each under its own
// timeout and all under ReadyTimeout. It returns by the deadline even when a
// check ignores its context.
func (r *Registry) evaluate() *evaluation {
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.base, r.cfg.ReadyTimeout)
	defer cancel()

	entries := r.snapshot()
	execs := make([]*execution, len(entries))
	for i, e := range entries {
		execs[i] = r.start(e)
	}
	// The executions run concurrently; waiting for them one by one against
	// absolute deadlines costs no more than the slowest.
	ev := &evaluation{results: make([]result, len(entries))}
	for i, e := range entries {
		ev.results[i] = r.await(ctx, start, e, execs[i])
		ev.failing = ev.failing || (ev.results[i].err != nil && ev.results[i].tier == Gating)
	}
	ev.at = time.Now()
	ev.duration = ev.at.Sub(start)
	r.metrics.observe(ev)
	return ev
}

func (r *Registry) snapshot() []*entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*entry(nil), r.entries...)
}

// start returns the check's execution in progress, or starts one. It returns
// nil once the registry is closed.
func (r *Registry) start(e *entry) *execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.running != nil {
		return e.running
	}
	if r.closed.Load() {
		return nil
	}
	ex := &execution{created: time.Now(), begun: make(chan struct{}), done: make(chan struct{})}
	e.running = ex
	r.wg.Go(func() {
		probeStarting(e.check.Name)
		ex.started = time.Now()
		close(ex.begun)
		// The check's context ends at its own deadline, counted from here
		// (capped by ReadyTimeout, also from here), or at Close, never when
		// the evaluation stops waiting: a probe that joins this execution
		// must read a timeout, not "canceled" (drivers return the context's
		// error). Not capped by the evaluation that started it: run late, by
		// a starved process, it would start with its budget spent, and the
		// next evaluation, which joins it, read a failure the check never had.
		cctx, cancel := context.WithDeadline(r.base, ex.started.Add(min(e.check.Timeout, r.cfg.ReadyTimeout)))
		defer cancel()
		ex.err = probe(cctx, e.check.Probe)
		ex.finish = time.Now()
		r.mu.Lock()
		e.running = nil
		r.mu.Unlock()
		close(ex.done)
	})
	return ex
}

// probe calls fn, turning a panic into an error.
func probe(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn(ctx)
}

// await waits for ex until the check's timeout, counted from when its
// goroutine called Probe, or the evaluation's deadline, whichever is first.
// Counting from the call keeps the budget for the check when a starved
// process runs its goroutine late (docs/readiness.md); ReadyTimeout still
// bounds the whole wait.
func (r *Registry) await(ctx context.Context, start time.Time, e *entry, ex *execution) result {
	res := result{name: e.check.Name, tier: e.check.Tier}
	if ex == nil {
		res.err, res.at = ErrClosed, time.Now()
		return res
	}
	if !finished(ctx, ex.begun) {
		res.at = time.Now()
		res.duration = res.at.Sub(start)
		res.err = errors.New("deadline exceeded (not started)")
		return res
	}
	wctx, cancel := context.WithDeadline(ctx, ex.started.Add(e.check.Timeout))
	defer cancel()
	deadline, _ := wctx.Deadline()
	if !finished(wctx, ex.done) || ex.finish.After(deadline) {
		res.at = time.Now()
		// How long the call has run, not this evaluation's wait: joined
		// after its deadline, a stuck call would read as taking no time.
		res.duration = res.at.Sub(ex.started)
		// The age tells an operator this is one stuck call, not a slow
		// dependency answering every probe late.
		res.err = fmt.Errorf("deadline exceeded (running %v)", res.duration.Round(time.Millisecond))
		return res
	}
	res.at = ex.finish
	res.duration = ex.finish.Sub(ex.started)
	if ex.err != nil {
		res.err = errors.New(shortMessage(ex.err))
	}
	return res
}

// finished waits for done until ctx ends. A check that finished before its
// turn to be awaited counts as finished even if its deadline has passed:
// executions are awaited one after another.
func finished(ctx context.Context, done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
	}
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
