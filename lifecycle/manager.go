package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drainkit/drainkit/drain"
)

// Manager owns the process's state and runs its drain. It is the single
// source of truth for "are we draining?": readiness reads [Manager.State] on
// every probe and the lease gate is a listener of [Manager.OnTransition].
//
// [Manager.Run] is the whole life of a process. [Manager.Shutdown] is the
// drain alone: for a framework that must drain from inside its own
// rollback of a failed start (package fxmodule does), and for reading the
// report of a run that has ended.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	tracker *drain.Tracker
	signals <-chan os.Signal // nil: the process's own SIGTERM and SIGINT; see SetSignals
	exit    func(int)

	state     atomic.Int32
	enteredAt atomic.Int64 // unix nanos of the last transition, for duration_ms

	// turn admits one transition at a time, its listeners included, so
	// every listener sees the transitions in the order the state changed.
	// A channel rather than a mutex: a transition waiting its turn is then
	// durably blocked, which testing/synctest can wait for.
	turn       chan struct{}
	mu         sync.Mutex                  // guards the fields below; never held while a hook or listener runs I/O
	afterDrain []func() []drain.HookResult // run after the drain, even a forced or late one; their results join the report
	listeners  []func(Transition)
	hooks      []drain.Hook
	starts     []func(context.Context) error
	stopReq    context.Context // cancelled by the first stop request; never by anything else
	stopNow    context.CancelFunc
	stopAt     time.Time
	stopWhy    string
	forced     bool
	forceNow   context.CancelFunc

	once   sync.Once // the one Shutdown
	report *Report
}

// New validates cfg (after applying defaults) and returns a Manager in
// state Starting. It starts nothing. It registers the manager's metrics
// with cfg.Registerer; a name already registered there (a second Manager
// on one registry) is an error matching [ErrConfig], as a bad field is.
func New(cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mt, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:     cfg,
		log:     cfg.Logger,
		exit:    os.Exit,
		turn:    make(chan struct{}, 1),
		tracker: new(drain.Tracker),
		metrics: mt,
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	m.stopReq, m.stopNow = context.WithCancel(context.Background())
	m.enteredAt.Store(time.Now().UnixNano())
	return m, nil
}

// Config returns the configuration m runs with, defaults applied: what
// code built around the manager reads to agree with it (fxmodule's
// readiness registry takes its Service and ReadyTimeout, fxlease its
// NodeID).
func (m *Manager) Config() Config { return m.cfg }

// SetSignals makes [Manager.Run] read ch instead of subscribing to the
// process's SIGTERM and SIGINT: the first value drains, the second forces
// the drain, the third exits with [ExitForced]. Call it before Run. It is
// for tests, which must not signal their own process (package
// fxmoduletest sends its signals this way).
func (m *Manager) SetSignals(ch <-chan os.Signal) { m.signals = ch }

// OnDrained registers fn to run once the drain has finished and the state
// is Stopped, also when the drain was forced or ran out of time, and
// before the report is made. Functions run in registration order; their
// results join the report after the drain's own and count toward the exit
// code like them. fn bounds its own work. Package fxmodule runs fx's
// OnStop hooks here, so clients close only after in-flight work is done.
func (m *Manager) OnDrained(fn func() []drain.HookResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.afterDrain = append(m.afterDrain, fn)
}

// Tracker returns the in-flight tracker for the servers and hooks to share;
// the adaptive delay watches its arrivals.
func (m *Manager) Tracker() *drain.Tracker { return m.tracker }

// State returns the current state. It is one atomic load, cheap enough for
// every probe.
func (m *Manager) State() State { return State(m.state.Load()) }

// withStop returns a child of parent that is also cancelled when a stop is
// requested: the context for start-up work that a signal should abort.
// Call cancel when the work is done.
func (m *Manager) withStop(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancelCtx := context.WithCancel(parent)
	stop := context.AfterFunc(m.stopReq, cancelCtx)
	return ctx, func() { stop(); cancelCtx() }
}

// OnTransition registers fn to run synchronously at every transition, in
// registration order, before anything else of the drain happens. fn must
// not block: it runs while the process flips (set a flag, close a channel).
// Transitions are serialised, listeners included: every listener sees every
// transition exactly once, in the order the state changed, even when a stop
// races the end of start-up. So fn must not itself cause a transition (call
// Shutdown): that would wait for its own turn forever.
func (m *Manager) OnTransition(fn func(Transition)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, fn)
}

// OnStart registers a start step for [Manager.Run]. Steps run in order;
// their context is cancelled when a stop is requested during start-up.
func (m *Manager) OnStart(fn func(ctx context.Context) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.starts = append(m.starts, fn)
}

// AddHook registers drain hooks. A hook that [drain.Run] would refuse
// (empty Name, a Phase that is not one of the five, a negative Timeout, a
// nil Run), or whose name is taken, is refused with an error and none of hooks is
// added; so are hooks added once the drain has begun.
func (m *Manager) AddHook(hooks ...drain.Hook) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.State(); s >= Draining {
		return fmt.Errorf("lifecycle: add hook while %s: the drain has begun", s)
	}
	seen := make(map[string]bool, len(m.hooks)+len(hooks))
	for _, h := range m.hooks {
		seen[h.Name] = true
	}
	for _, h := range hooks {
		if err := h.Validate(); err != nil {
			return configError{err}
		}
		if seen[h.Name] {
			return configError{fmt.Errorf("lifecycle: hook %q added twice", h.Name)}
		}
		seen[h.Name] = true
	}
	m.hooks = append(m.hooks, hooks...)
	return nil
}

// markRunning moves Starting → Running once start-up has finished. It
// fails if a stop was requested meanwhile: the caller should then Shutdown.
func (m *Manager) markRunning() error {
	return m.transition(Running, "started")
}

// requestStop asks the process to stop, for reason. The first call wins
// and fixes the drain's deadline (DrainTimeout from now); later calls do
// nothing. It does not drain by itself: Run reacts by calling Shutdown.
func (m *Manager) requestStop(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requestStopLocked(reason)
}

func (m *Manager) requestStopLocked(reason string) {
	if m.stopReq.Err() == nil {
		m.stopAt, m.stopWhy = time.Now(), reason
		m.stopNow()
	}
}

// force skips what is left of the drain: hook contexts are cancelled
// (servers are stopped without waiting) and later phases are skipped. A
// force before Shutdown makes the coming drain forced from its start.
func (m *Manager) force(reason string) {
	m.mu.Lock()
	m.requestStopLocked(reason)
	m.forced = true
	cancel := m.forceNow
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// transition moves to `to` if the state machine allows it and runs the
// listeners. Listeners run outside m.mu so they may read the Manager.
func (m *Manager) transition(to State, reason string) error {
	return m.transitionWith(to, reason, nil)
}

// transitionWith is transition, handing listeners rep (the drain's report
// at the flip to Stopped).
func (m *Manager) transitionWith(to State, reason string, rep *drain.Report) error {
	m.turn <- struct{}{}
	defer func() { <-m.turn }()
	m.mu.Lock()
	from := m.State()
	if !canMove(from, to) {
		m.mu.Unlock()
		return fmt.Errorf("lifecycle: illegal transition %s → %s", from, to)
	}
	if to == Running {
		if m.stopReq.Err() != nil {
			m.mu.Unlock()
			return fmt.Errorf("lifecycle: not running: stop requested during start-up (%s)", m.stopWhy)
		}
	}
	now := time.Now()
	inOld := now.Sub(time.Unix(0, m.enteredAt.Swap(now.UnixNano())))
	m.state.Store(int32(to))
	listeners := append([]func(Transition){}, m.listeners...)
	m.mu.Unlock()

	t := Transition{From: from, To: to, Reason: reason, At: now, Report: rep}
	for _, fn := range listeners {
		fn(t)
	}
	m.metrics.transition(t)
	m.log.Info("state transition",
		slog.String("service", m.cfg.Service), slog.String("node_id", m.cfg.NodeID),
		slog.String("old_status", from.String()), slog.String("new_status", to.String()),
		slog.String("reason", reason), slog.Float64("duration_ms", msOf(inOld)))
	return nil
}

// Shutdown drains the process once: it flips to Draining (listeners run),
// keeps serving for the propagation delay (skipped when the process never
// reached Running: no load balancer has it), runs the drain hooks phase by
// phase, flips to Stopped and logs the report. The deadline is DrainTimeout
// after the stop was first requested, or ctx's deadline if earlier;
// cancelling ctx, like a second signal, skips what is left.
//
// Later and concurrent calls wait for the first and return its report.
//
// Called while the process is still Starting and no stop was requested, it
// is the drain of a failed start (a framework rolling back): the report
// carries reason as its StartError and [ExitStartFailed].
func (m *Manager) Shutdown(ctx context.Context, reason string) *Report {
	return m.shutdownOnce(ctx, reason, nil)
}

// shutdownOnce is Shutdown with the error of a failed start, if Run knows it.
func (m *Manager) shutdownOnce(ctx context.Context, reason string, startErr error) *Report {
	m.once.Do(func() { m.report = m.shutdown(ctx, reason, startErr) })
	return m.report
}

func (m *Manager) shutdown(ctx context.Context, reason string, startErr error) *Report {
	m.mu.Lock()
	if startErr == nil && m.State() == Starting && m.stopReq.Err() == nil {
		startErr = errors.New(reason) // nobody asked to stop: the start failed
	}
	m.requestStopLocked(reason)
	reason, deadline := m.stopWhy, m.stopAt.Add(m.cfg.DrainTimeout)
	m.mu.Unlock()

	wasRunning := m.State() == Running
	_ = m.transition(Draining, reason) // fails only from Stopped, which Once rules out
	dctx, cancelDeadline := context.WithDeadline(ctx, deadline)
	defer cancelDeadline()
	dctx, cancel := context.WithCancel(dctx)
	defer cancel()
	m.mu.Lock()
	m.forceNow = cancel
	forced := m.forced
	hooks := append([]drain.Hook{}, m.hooks...)
	afterDrain := append([]func() []drain.HookResult{}, m.afterDrain...)
	m.mu.Unlock()
	if forced {
		cancel()
	}

	if wasRunning { // never ready, never in a load balancer: nothing to wait for
		m.delay(dctx)
	}
	rep := drain.Run(dctx, reason, hooks, drain.OnPhase(func(p drain.Phase, n int) {
		m.logPhase("drain phase", string(p), n)
	}))
	m.logSkipped(rep.Hooks)
	rep.Start = m.stopAt // the report covers the whole budget, delay included
	rep.Duration = time.Since(m.stopAt)
	_ = m.transitionWith(Stopped, "drained", rep)
	if len(afterDrain) > 0 { // the drain is over: what runs now only closes
		var after []drain.HookResult
		for _, fn := range afterDrain {
			after = append(after, fn()...)
		}
		rep.Hooks = append(rep.Hooks, after...)
		rep.Duration = time.Since(m.stopAt)
		m.logAfterDrain(after)
	}
	r := &Report{Report: rep, Service: m.cfg.Service, NodeID: m.cfg.NodeID}
	r.ExitCode = exitCode(r)
	if startErr != nil {
		r.startFailed(startErr)
	}
	m.metrics.drained(r)
	m.logReport(r)
	return r
}

// delay keeps serving while load balancers notice the flip. Fixed, it
// waits DrainDelay. Adaptive (QuietWindow > 0), it ends once no request
// arrived for QuietWindow, never before DelayFloor, never after DrainDelay.
func (m *Manager) delay(ctx context.Context) {
	if m.cfg.DrainDelay <= 0 {
		return
	}
	start := time.Now()
	end := start.Add(m.cfg.DrainDelay)
	next := end
	for {
		if m.cfg.QuietWindow > 0 {
			next = m.adaptiveEnd(start)
			if next.After(end) {
				next = end
			}
			if !time.Now().Before(next) {
				return
			}
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if !next.Before(end) {
			return
		}
		// An adaptive wake-up: re-check, a request may have arrived meanwhile.
	}
}

// adaptiveEnd is the earliest moment the adaptive delay may end given the
// arrivals seen so far: floor, or a quiet window after the last arrival.
func (m *Manager) adaptiveEnd(start time.Time) time.Time {
	at := start.Add(m.cfg.DelayFloor)
	if q := m.tracker.LastArrival().Add(m.cfg.QuietWindow); q.After(at) {
		at = q
	}
	return at
}

// logPhase logs the hooks of phase that begin, under msg. The key is
// "phase", as in the report, so the two can be matched.
func (m *Manager) logPhase(msg, phase string, hooks int) {
	m.log.Info(msg, slog.String("service", m.cfg.Service), slog.String("node_id", m.cfg.NodeID),
		slog.String("phase", phase), slog.Int("hooks", hooks), slog.Float64("elapsed_ms", msOf(time.Since(m.stopAt))))
}

// logSkipped logs, per phase, the hooks a drain cut short never ran:
// their phase never began, so it had no line of its own.
func (m *Manager) logSkipped(results []drain.HookResult) {
	var skipped []drain.HookResult
	for _, r := range results {
		if r.Outcome == drain.Skipped {
			skipped = append(skipped, r)
		}
	}
	m.logPerPhase("drain phase skipped", skipped)
}

// logAfterDrain logs, per phase, how many results the work after the
// drain (fx's OnStop hooks under fxmodule) added to the report: they ran
// after the drain's own phase lines, and without this line the report
// would list more hooks of a phase than its line said.
func (m *Manager) logAfterDrain(results []drain.HookResult) {
	m.logPerPhase("after-drain hooks", results)
}

// logPerPhase logs msg once per phase of results, in their order, with
// how many results it has.
func (m *Manager) logPerPhase(msg string, results []drain.HookResult) {
	var phases []drain.Phase
	count := map[drain.Phase]int{}
	for _, r := range results {
		if count[r.Phase] == 0 {
			phases = append(phases, r.Phase)
		}
		count[r.Phase]++
	}
	for _, p := range phases {
		m.logPhase(msg, string(p), count[p])
	}
}

func (m *Manager) logReport(r *Report) {
	level := slog.LevelInfo
	if r.ExitCode != ExitClean {
		level = slog.LevelError
	}
	ctx := context.Background()
	if !m.log.Enabled(ctx, level) {
		return
	}
	reportLogger(m.log).Log(ctx, level, "drain report",
		slog.String("service", r.Service), slog.String("node_id", r.NodeID),
		slog.Int("exit_code", r.ExitCode), slog.Attr{Key: "report", Value: r.logValue()})
}

// errStartAborted marks a start step cut short by a stop request.
var errStartAborted = errors.New("lifecycle: start aborted by a stop request")

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
