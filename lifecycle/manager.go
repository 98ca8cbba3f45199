package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/internal/configerr"
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
	cfg         Config
	log         *slog.Logger
	metrics     *metrics
	tracker     *drain.Tracker
	exitNow     chan struct{} // closed by a third signal: Run returns at once
	exitNowOnce sync.Once

	state          atomic.Int32
	stateEnteredAt atomic.Int64 // unix nanos, for duration_ms

	// transitioning admits one transition at a time, its listeners
	// included, so every listener sees the transitions in the order the
	// state changed. A channel rather than a mutex: a transition waiting
	// its turn is then durably blocked, which testing/synctest can wait for.
	transitioning chan struct{}

	mu                  sync.Mutex // guards the fields below; never held while a hook or listener runs
	startSteps          []func(context.Context) error
	listeners           []func(Transition)
	hooks               []drain.Hook
	onDrained           []func() []drain.HookResult
	stopRequested       context.Context // done at the first stop request, and by nothing else
	cancelStopRequested context.CancelFunc
	stopRequestedAt     time.Time
	stopReason          string
	forceRequested      bool
	cancelDrain         context.CancelFunc // nil until the drain begins
	flip                flip               // set by the move to Draining

	runCalled    atomic.Bool            // Run was called: a second call starts nothing
	shutdownOnce sync.Once              // the first shutdown drains; the others wait for its report
	report       atomic.Pointer[Report] // set once the drain has finished
	reported     chan struct{}          // closed once report is set
	reportLogged atomic.Bool            // a drain report line was written: the process writes one
	// drained is a copy of the drain's report once its phases are over,
	// before the work after it (OnDrained): what a third signal reports then.
	drained atomic.Pointer[drain.Report]
}

// New validates cfg (after applying defaults) and returns a Manager in
// state Starting. It starts nothing. It registers the manager's metrics
// with cfg.Registerer; a name already registered there (a second Manager
// on one registry) is an error matching [ErrConfig], as a bad field is.
func New(cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	mt, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:           cfg,
		log:           cfg.Logger,
		exitNow:       make(chan struct{}),
		reported:      make(chan struct{}),
		transitioning: make(chan struct{}, 1),
		tracker:       new(drain.Tracker),
		metrics:       mt,
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	m.stopRequested, m.cancelStopRequested = context.WithCancel(context.Background())
	m.stateEnteredAt.Store(time.Now().UnixNano())
	return m, nil
}

// Config returns the configuration m runs with, defaults applied: what
// code built around the manager reads to agree with it (fxmodule's
// readiness registry takes its Service and ReadyTimeout, fxlease its
// NodeID).
func (m *Manager) Config() Config { return m.cfg }

// OnDrained registers fn to run once the drain has finished and the state
// is Stopped, also when the drain was forced or ran out of time, and
// before the report is made. Functions run in registration order; their
// results join the report after the drain's own and count toward the exit
// code like them. fn bounds its own work. Package fxmodule runs fx's
// OnStop hooks here, so clients close only after in-flight work is done.
// A nil fn panics here, as http.HandleFunc's nil handler does.
func (m *Manager) OnDrained(fn func() []drain.HookResult) {
	if fn == nil {
		panic("lifecycle: OnDrained: nil function")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onDrained = append(m.onDrained, fn)
}

// Tracker returns the in-flight tracker for the servers and hooks to share;
// the adaptive delay watches its arrivals.
func (m *Manager) Tracker() *drain.Tracker { return m.tracker }

// State returns the current state. It is one atomic load, cheap enough for
// every probe.
func (m *Manager) State() State { return State(m.state.Load()) }

// OnTransition registers fn to run synchronously at every transition, in
// registration order, before anything else of the drain happens. fn must
// not block: it runs while the process flips (set a flag, close a channel).
// Transitions are serialised, listeners included: every listener sees every
// transition exactly once, in the order the state changed, even when a stop
// races the end of start-up. So fn must not itself cause a transition (call
// Shutdown): that would wait for its own turn forever. A nil fn panics
// here, as http.HandleFunc's nil handler does.
func (m *Manager) OnTransition(fn func(Transition)) {
	if fn == nil {
		panic("lifecycle: OnTransition: nil listener")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, fn)
}

// OnStart registers a start step for [Manager.Run]. Steps run in order;
// their context is cancelled when a stop is requested during start-up.
// A nil fn panics here, as http.HandleFunc's nil handler does.
func (m *Manager) OnStart(fn func(ctx context.Context) error) {
	if fn == nil {
		panic("lifecycle: OnStart: nil step")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.startSteps = append(m.startSteps, fn)
}

// AddHook registers drain hooks. A hook that [drain.Run] would refuse
// (empty Name, a Phase that is not one of the five, a negative Timeout, a
// nil Run), or whose name is taken, is refused with an error and none of
// the hooks is added; so are hooks added once the drain has begun.
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
			return configerr.Wrap(err)
		}
		if seen[h.Name] {
			return configerr.Errorf("lifecycle: hook %q added twice", h.Name)
		}
		seen[h.Name] = true
	}
	m.hooks = append(m.hooks, hooks...)
	return nil
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
