package readiness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/lifecycle"
)

// Errors returned by a [Registry].
var (
	// ErrDuplicate is returned when a check or heartbeat name is taken.
	ErrDuplicate = errors.New("readiness: duplicate name")
	// ErrClosed is returned by Add once the registry is closed, and is the
	// error of a check that could not run because of it.
	ErrClosed = errors.New("readiness: closed")
)

// errNotNew is what a zero Registry answers with: without New it has no
// service, node or lifecycle state to answer from.
var errNotNew = errors.New("readiness: Registry not made by New")

// Registry holds the checks and heartbeats of one process and answers live
// and ready probes. Create it with [New]; it starts no goroutine until a
// probe needs an evaluation or, with a heartbeat, the process runs (its
// clock), and [Registry.Close] waits for every goroutine it started.
// The zero value is not usable, for it has no service, node or lifecycle
// state: its probes answer fail and its methods return an error that says
// so, instead of panicking.
type Registry struct {
	cfg     Config
	state   func() lifecycle.State
	metrics *metrics

	// base is the parent of every check's context; Close cancels it.
	base   context.Context
	cancel context.CancelFunc

	// last is the latest completed evaluation; read without a lock on the
	// hot path of a cached probe.
	last atomic.Pointer[evaluation]
	// answered is the newest evaluation a probe answered from (its seq): a
	// status read from an older one is not recorded over it.
	answered atomic.Uint64

	mu         sync.Mutex
	entries    []*entry
	heartbeats []*heartbeat
	clock      runClock      // the running time heartbeats are judged by
	refreshing chan struct{} // non-nil while an evaluation runs; closed when it lands
	// closed is set under mu (so no check starts after Close has begun
	// waiting) and read without it on the path of a cached probe.
	closed atomic.Bool
	wg     sync.WaitGroup // evaluations, check executions and the clock

	readyStatus transitions
	liveStatus  transitions
}

// New returns a Registry for the service described by cfg. state reports
// the process's lifecycle state, such as a lifecycle.Manager's State
// method; it is called on every ready probe and its answer never cached.
// A bad cfg or a nil state is refused with an error naming the field and
// matching lifecycle.ErrConfig.
func New(cfg Config, state func() lifecycle.State) (*Registry, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if state == nil {
		return nil, configerr.Errorf("readiness: state is nil; want a function such as a lifecycle.Manager's State method")
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	r := &Registry{cfg: cfg, state: state, metrics: m, clock: runClock{epoch: time.Now()}}
	// A context, not a goroutine: cancelling it stops well-behaved checks.
	r.base, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// notNew reports whether r is a zero Registry; New refuses a nil state.
func (r *Registry) notNew() bool { return r.state == nil }

// Config returns the configuration r runs with, defaults applied. An
// adapter that serves r's answers elsewhere reads it to agree with r: the
// grpc.health.v1 server of package grpchealth serves under its Service
// and paces its polling by its CacheTTL.
func (r *Registry) Config() Config { return r.cfg }

// Add registers a check. A check with an empty name or one that is not
// UTF-8, a nil Probe, a negative Timeout or a name already taken is
// rejected with an error matching lifecycle.ErrConfig (a mistake in how
// the app is put together: fxmodule.Run exits 78), and nothing is added. A zero Timeout means
// [Config.CheckTimeout].
// Checks may be added while probes are answered; the next evaluation
// includes them.
func (r *Registry) Add(c Check) error {
	if r.notNew() {
		return errNotNew
	}
	if err := c.validate(); err != nil {
		return configerr.Wrap(err)
	}
	if c.Timeout == 0 {
		c.Timeout = r.cfg.CheckTimeout
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return ErrClosed
	}
	for _, e := range r.entries {
		if e.check.Name == c.Name {
			return configerr.Errorf("readiness: two checks named %q: give each its own name (%w)", c.Name, ErrDuplicate)
		}
	}
	r.entries = append(r.entries, &entry{check: c})
	r.metrics.addCheck(c)
	return nil
}

// Close stops evaluations, cancels the contexts of running checks and waits
// for every goroutine the registry started, or for ctx. A check that ignores
// its context keeps Close waiting until it returns or ctx ends; Close then
// returns ctx's error. From the moment Close is called, ready probes
// answer fail with reason "stopped" and run no check: a result cached
// before Close says nothing about a process whose checks can no longer run.
func (r *Registry) Close(ctx context.Context) error {
	if r.notNew() {
		return errNotNew
	}
	r.mu.Lock()
	r.closed.Store(true)
	r.mu.Unlock()
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("readiness: close: checks ignoring their context still running: %s: %w",
			strings.Join(r.stuck(), ", "), ctx.Err())
	}
}

// stuck names the checks whose Probe call is still running, with how long.
func (r *Registry) stuck() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, e := range r.entries {
		if e.running != nil {
			names = append(names, fmt.Sprintf("%s (running %v)", e.check.Name, time.Since(e.running.created).Round(time.Millisecond)))
		}
	}
	return names
}

// results returns an evaluation no older than CacheTTL or, while a refresh
// runs, the previous one: a probe queues behind a refresh only when there is
// nothing recent (younger than 2×CacheTTL) to answer from. singleflight is
// not used: it cannot tell a probe that a refresh is already running, and
// Close could not wait for its goroutine.
func (r *Registry) results(ctx context.Context) (*evaluation, error) {
	last := r.last.Load()
	if r.fresh(last) {
		return last, nil
	}
	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	// Re-read under the lock: another probe may have just landed a refresh.
	last = r.last.Load()
	if r.fresh(last) {
		r.mu.Unlock()
		return last, nil
	}
	landed := r.refreshing
	recent := last != nil && time.Since(last.at) < 2*r.cfg.CacheTTL
	if recent {
		if landed == nil {
			r.refresh()
		}
		r.mu.Unlock()
		return last, nil // stale while revalidating: nobody queues behind a refresh
	}
	if landed == nil {
		landed = r.refresh()
	}
	r.mu.Unlock()

	// Nothing recent to answer from (the first probes ever, or the first
	// after a quiet spell): wait for the refresh. It belongs to the
	// registry, so a prober that goes away does not cancel it for the rest.
	select {
	case <-landed:
		return r.last.Load(), nil
	case <-ctx.Done():
		return nil, ctx.Err() // nothing recent to answer from: an old result would lie
	}
}

// failingDivisor divides CacheTTL into how long a failing evaluation (a
// gating check failed) is reused: a replica held out of the balancer sees
// its dependency's recovery within a fifth of the cache rather than a whole
// one (docs/readiness.md has the price). grpchealth polls at half this
// (its recheckDivisor): change both together.
const failingDivisor = 5

// fresh reports whether ev may answer a probe without a refresh: it is
// younger than CacheTTL, or than CacheTTL/failingDivisor when a gating
// check failed.
func (r *Registry) fresh(ev *evaluation) bool {
	if ev == nil {
		return false
	}
	ttl := r.cfg.CacheTTL
	if ev.failing {
		ttl /= failingDivisor
	}
	return time.Since(ev.at) < ttl
}

// refresh starts one evaluation; r.mu is held.
func (r *Registry) refresh() chan struct{} {
	landed := make(chan struct{})
	r.refreshing = landed
	r.wg.Go(func() {
		ev := r.evaluate()
		if prev := r.last.Load(); prev != nil {
			ev.seq = prev.seq + 1 // one refresh at a time: the order they land in
		}
		r.last.Store(ev)
		r.mu.Lock()
		r.refreshing = nil
		r.mu.Unlock()
		close(landed)
	})
	return landed
}
