package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/lifecycle"
)

type loggerParams struct {
	fx.In
	Logger *slog.Logger `optional:"true"`
}

// Run builds an fx app from opts (which must include [Module] and a
// lifecycle.Config), runs it and returns the process exit code (see the
// lifecycle Exit… constants). It is the one supported way to run an app
// that includes Module: Module refuses to start under app.Run, app.Start
// or fxtest, which would mark the process ready before every OnStart hook
// returned and would swallow the second signal. Use it in place of app.Run:
//
//	func main() { os.Exit(fxmodule.Run(fxmodule.Module, fxmodule.FromEnv, …)) }
//
// Unlike app.Run it:
//   - refuses a configuration mistake found before the start with
//     [lifecycle.ExitConfig] and one log line in the mistake's own words:
//     an fx constructor's error matching lifecycle.ErrConfig, a type that
//     nothing provides (fxmodule.Module or a lifecycle.Config forgotten),
//     a server or drain hook name taken twice;
//   - splits fx's StopTimeout between the drain (DRAIN_TIMEOUT) and fx's
//     OnStop hooks (the rest): an app that sets no fx.StopTimeout gets
//     DRAIN_TIMEOUT + [StopMargin], and one whose rest is shorter than
//     StopMargin is refused (ExitConfig), naming both values;
//   - enforces fx's StartTimeout itself, cancelling the OnStart hooks
//     wrapped with [Abortable] as a signal would, so that fx's rollback of a
//     start that timed out still has a live context and stops what had
//     started (exit code [lifecycle.ExitStartFailed]);
//   - runs the app with [lifecycle.Manager.Run], whose start step is fx's
//     whole start: signal handling is the manager's (the first
//     SIGTERM/SIGINT drains, the second forces, the third exits; fx's own
//     handler would swallow the second);
//   - aborts a start in progress on a signal: OnStart hooks wrapped with
//     [Abortable] see their context cancelled, and fx stops what had started;
//   - marks the process Running only after every OnStart has returned, and
//     drains before fx runs any OnStop hook, so readiness has flipped and
//     in-flight work has finished before anything is closed;
//   - then runs fx's OnStop hooks under a fresh budget of StopTimeout −
//     DRAIN_TIMEOUT, also after a forced drain or one that ran out of time,
//     so clients are still closed and telemetry flushed; a hook still
//     running at the end of that budget is abandoned. Each OnStop hook is in
//     the drain report as a hook of phase close named "fx.OnStop
//     <function>", and a failed one makes the exit code
//     [lifecycle.ExitHookFailed] if nothing worse happened. (The names come
//     from fx's event log: an fx.WithLogger option replaces the recorder,
//     and the report then holds one "fx.OnStop" result for all of them.)
//     When fx itself rolls back a failed start, the drain runs inside that
//     rollback, before fx stops what the drain hooks use; the OnStop hooks
//     fx runs after it are in fx's log, not in the report.
func Run(opts ...fx.Option) int {
	var (
		m   *lifecycle.Manager
		app *fx.App
		rec = &stopRecorder{}
		d   = &driver{}
	)
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	var stopTimeout time.Duration // fx's, or derived from DRAIN_TIMEOUT
	afterDrain := func() []drain.HookResult {
		return stopApp(app, rec, stopTimeout-m.Config().DrainTimeout)
	}
	app = fx.New(append([]fx.Option{eventLogger(rec), fx.StopTimeout(noStopTimeout)}, append(opts,
		fx.Supply(d),
		fx.Decorate(func(fx.Shutdowner) fx.Shutdowner { return shutdowner{stop} }),
		fx.Populate(&m),
	)...)...)
	if err := app.Err(); err != nil {
		return refuseToBuild(err)
	}
	m.OnDrained(afterDrain)
	var err error
	if stopTimeout, err = stopTimeoutOf(app, m.Config().DrainTimeout); err != nil {
		logger(m.Config().Logger).Error("fxmodule: refusing to start: bad configuration",
			"err", err.Error(), "exit_code", lifecycle.ExitConfig)
		return lifecycle.ExitConfig
	}
	d.app, d.m = app, m
	rec.rollingOut = d.rollingBack
	m.OnStart(d.start)
	return m.Run(ctx).ExitCode
}

// shutdowner is the fx.Shutdowner of an app run by [Run]: fx's own would
// tell receivers that Run does not start, and nothing would stop. A
// shutdown requested through it stops the app like a first signal; the
// exit code is the drain's, so fx.ExitCode is not used.
type shutdowner struct{ stop context.CancelCauseFunc }

func (s shutdowner) Shutdown(...fx.ShutdownOption) error {
	s.stop(errors.New("fx.Shutdowner: shutdown requested"))
	return nil
}

// driver is what Run keeps of one app: the app, and the context that
// [Abortable] start hooks watch.
type driver struct {
	app *fx.App
	m   *lifecycle.Manager

	mu       sync.Mutex
	abort    context.Context // ends at a stop request or at fx's StartTimeout
	rollback error           // why fx rolls the start back, from its events
}

// rollingBack drains when fx begins to roll a failed start back: fx says
// so in an event, synchronously, before it runs any OnStop hook, so the
// drain comes before the rollback closes what the drain hooks use,
// whichever OnStart hooks had run. The report says why the start failed.
func (d *driver) rollingBack(err error) {
	d.mu.Lock()
	d.rollback = err
	d.mu.Unlock()
	reason := "start failed"
	if abort := d.abortContext(); abort != nil && errors.Is(context.Cause(abort), errStartTimedOut) {
		reason = fmt.Sprintf("start timed out after %s", d.app.StartTimeout())
	} else if err != nil {
		reason += ": " + err.Error()
	}
	d.m.Shutdown(context.Background(), reason) // the drain has a deadline of its own
}

// rollbackCause is why fx rolls the start back, or nil.
func (d *driver) rollbackCause() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rollback
}

// driverKey is the key of the *driver in the context fx hands the OnStart
// hooks: start puts it in the context it gives app.Start, and [Abortable],
// in the same package, finds it there. The context is the start's own,
// so a driver can be found only during its app's start, and no table
// outlives the app.
type driverKey struct{}

// errStartTimedOut marks a start that outlasted fx's StartTimeout.
var errStartTimedOut = errors.New("fxmodule: start timed out")

// start is the manager's one start step: fx's whole start. ctx ends when a
// stop is requested. A signal or fx's StartTimeout (enforced here) cancels
// the OnStart hooks wrapped with [Abortable]; the one that aborts fails the
// start, and fx rolls back: the drain first (see rollingBack), then fx's
// OnStop hooks. fx rolls back with the very context it was given and stops
// nothing once that context has ended, so app.Start gets one that lasts
// the start, the drain and StopMargin for the OnStop hooks; it also bounds
// start steps that retry (the lease manager's). A hook not wrapped finishes
// its start; if it is still running when that context ends, start gives up
// on it and the manager drains what it can (the process is exiting).
func (d *driver) start(ctx context.Context) error {
	abort, cancel := context.WithTimeoutCause(ctx, d.app.StartTimeout(), errStartTimedOut)
	defer cancel()
	d.mu.Lock()
	d.abort = abort
	d.mu.Unlock()

	budget := d.app.StartTimeout() + d.m.Config().DrainTimeout + StopMargin
	fxCtx, cancelFx := context.WithTimeout(context.WithValue(context.Background(), driverKey{}, d), budget)
	defer cancelFx()
	done := make(chan error, 1)
	go func() { done <- d.app.Start(fxCtx) }()
	var err error
	select {
	case err = <-done:
	case <-fxCtx.Done(): // fx's own Start returns at its context's end, too
		err = fmt.Errorf("an OnStart hook not wrapped with Abortable was still running after %s", budget)
	}
	if errors.Is(context.Cause(abort), errStartTimedOut) {
		// %v, not %w: the hooks' context.Canceled must not make the
		// manager take the timeout for a signal's abort.
		if err == nil {
			return fmt.Errorf("%w after %s", errStartTimedOut, d.app.StartTimeout())
		}
		return fmt.Errorf("%w after %s: %v", errStartTimedOut, d.app.StartTimeout(), err)
	}
	return err
}

// abortContext returns the context that Abortable hooks watch, or nil
// before the start began.
func (d *driver) abortContext() context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.abort
}

// Abortable wraps an OnStart function so that its context is also
// cancelled when a stop is requested (a signal during start-up) or fx's
// StartTimeout passes. Wrap the start steps that can take long (warming
// caches, waiting for a dependency):
//
//	lc.Append(fx.Hook{OnStart: fxmodule.Abortable(m, warmCache)})
//
// It takes effect when fx starts m's app under [Run] (fxmoduletest
// included); called any other way, fn runs with its context unchanged.
func Abortable(m *lifecycle.Manager, fn func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if d, ok := ctx.Value(driverKey{}).(*driver); ok && d.m == m {
			if abort := d.abortContext(); abort != nil {
				var cancel context.CancelCauseFunc
				ctx, cancel = context.WithCancelCause(ctx)
				stop := context.AfterFunc(abort, func() { cancel(context.Cause(abort)) })
				defer func() { stop(); cancel(nil) }()
			}
		}
		return fn(ctx)
	}
}

// stopApp runs fx's OnStop hooks under a fresh budget and returns how each
// ended. The budget is fresh rather than what is left of the drain's
// because the drain may have used it all (forced, or out of time), and
// closing clients and flushing telemetry matter most then. fx gives up on a
// hook at the budget's end (it waits for no hook past its context), so a
// hung OnStop cannot keep the process alive.
func stopApp(app *fx.App, rec *stopRecorder, budget time.Duration) []drain.HookResult {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	err := app.Stop(ctx)
	return rec.results(err, time.Since(start))
}

// StopMargin is the least budget [Run] leaves fx's OnStop hooks after the
// drain (closing clients, flushing telemetry). Run splits fx's StopTimeout
// in two: DRAIN_TIMEOUT for the drain, the rest for the OnStop hooks. An
// app that sets no fx.StopTimeout gets DRAIN_TIMEOUT + StopMargin; one
// that sets a shorter one is refused. So a process run by Run exits within
// StopTimeout of the first signal; set the pod's termination grace period
// above it.
const StopMargin = 5 * time.Second

// noStopTimeout is the fx.StopTimeout that Run gives fx before the app's
// options, so that it can tell an app that set none (fx would report its
// own default, 15s, as if the app had chosen it); no app sets a negative
// one.
const noStopTimeout = -1

// stopTimeoutOf is the stop timeout of app, whose drain takes drainTimeout:
// DRAIN_TIMEOUT + StopMargin when the app set none, or the app's own if it
// leaves the OnStop hooks at least StopMargin.
func stopTimeoutOf(app *fx.App, drainTimeout time.Duration) (time.Duration, error) {
	least := drainTimeout + StopMargin
	switch set := app.StopTimeout(); {
	case set == noStopTimeout:
		return least, nil
	case set < least:
		return 0, fmt.Errorf("fxmodule: fx.StopTimeout %s is shorter than DRAIN_TIMEOUT %s + StopMargin %s: "+
			"drop fx.StopTimeout (Run then takes %s), raise it to at least %s, or lower DRAIN_TIMEOUT", set, drainTimeout, StopMargin, least, least)
	default:
		return set, nil
	}
}

// StopTimeoutFor returns fx.StopTimeout(cfg.DrainTimeout + StopMargin):
// what [Run] takes when the app sets no fx.StopTimeout, so an app needs it
// only to state the timeout. fx takes the option only at the top level of
// fx.New, so read the config before it (lifecycle.ConfigFromEnv).
func StopTimeoutFor(cfg lifecycle.Config) fx.Option {
	return fx.StopTimeout(drainTimeout(cfg) + StopMargin)
}

// drainTimeout is cfg's DrainTimeout, its default when unset.
func drainTimeout(cfg lifecycle.Config) time.Duration {
	if cfg.DrainTimeout == 0 {
		return lifecycle.DefaultDrainTimeout
	}
	return cfg.DrainTimeout
}
