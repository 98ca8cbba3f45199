package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/lifecycle"
)

// driver marks an app driven by Run, which owns signals and ordering.
type driver struct {
	// stopping is set once Run begins its shutdown: Module's OnStop, which
	// fx then calls from within that shutdown, must not start it again.
	stopping atomic.Bool
}

type loggerParams struct {
	fx.In
	Logger *slog.Logger `optional:"true"`
}

// SlogEvents sends fx's own events to the graph's *slog.Logger (or
// slog.Default()), so fx and drainkit log through one handler. Run adds it.
// Routine events (provided, invoked, hook executed) log at Debug so that a
// service's Info log shows its own story; fx's errors stay at Error.
var SlogEvents = fx.WithLogger(slogEvents)

// TimeoutError is returned when fx's StopTimeout is shorter than
// DRAIN_TIMEOUT plus [StopMargin]: fx would give up on stopping before the
// drain and the OnStop hooks after it may end.
type TimeoutError struct {
	// Stop is fx's StopTimeout and Drain is DRAIN_TIMEOUT, as durations.
	Stop, Drain string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("fxmodule: fx StopTimeout %s is shorter than DRAIN_TIMEOUT %s + StopMargin %s: raise it with fx.StopTimeout at the top level of fx.New (fxmodule.StopTimeoutFor), or lower DRAIN_TIMEOUT", e.Stop, e.Drain, StopMargin)
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
//   - splits fx's StopTimeout between the drain (DRAIN_TIMEOUT) and fx's
//     OnStop hooks (the rest), and refuses to start (ExitConfig) when the
//     rest is shorter than [StopMargin], naming both values: fx.StopTimeout
//     belongs to the top-level app, so it is read back with
//     App.StopTimeout() rather than set here;
//   - enforces fx's StartTimeout itself, as a stop request, so that fx's
//     rollback of a start that timed out still has a live context and
//     stops what had started (exit code [lifecycle.ExitStartFailed]);
//   - owns signal handling: the first SIGTERM/SIGINT drains, the second
//     forces, the third exits (fx's own handler would swallow the second);
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
	afterDrain := func() []drain.HookResult {
		return stopApp(app, rec, app.StopTimeout()-m.Config().DrainTimeout)
	}
	app = fx.New(append([]fx.Option{rec.option()}, append(opts,
		fx.Supply(d),
		fx.Provide(AsOption(func() lifecycle.Option { return lifecycle.WithAfterDrain(afterDrain) })),
		fx.Populate(&m),
	)...)...)
	return run(app, m, d)
}

func run(app *fx.App, m *lifecycle.Manager, d *driver) int {
	if err := app.Err(); err != nil {
		slog.Error("fxmodule: cannot build the app", "err", err)
		var ce *lifecycle.ConfigError
		if errors.As(err, &ce) {
			return lifecycle.ExitConfig
		}
		return lifecycle.ExitStartFailed
	}
	drainT := m.Config().DrainTimeout
	if stop := app.StopTimeout(); stop < drainT+StopMargin {
		slog.Error("fxmodule: refusing to start", "err", &TimeoutError{Stop: stop.String(), Drain: drainT.String()})
		return lifecycle.ExitConfig
	}
	stopSignals := m.HandleSignals()
	defer stopSignals()

	startErr := start(app, m)
	if startErr == nil {
		if err := m.MarkRunning(); err == nil {
			<-m.StopRequested()
		}
	}
	reason := "stop requested"
	// A signal's abort is a clean stop; a timeout, though it also requests
	// a stop, is a failed start. Read before Shutdown requests a stop itself.
	aborted := isAbort(m) && !errors.Is(startErr, errStartTimedOut)
	if startErr != nil {
		reason = "start failed: " + startErr.Error()
	}
	d.stopping.Store(true)
	// The drain, then fx's OnStop hooks (WithAfterDrain), then the report.
	r := m.Shutdown(context.Background(), reason)
	if startErr != nil && !aborted {
		r.StartFailed(startErr)
	}
	return r.ExitCode
}

// isAbort reports whether a failed start was our own cancellation.
func isAbort(m *lifecycle.Manager) bool {
	select {
	case <-m.StopRequested():
		return true
	default:
		return false
	}
}

// errStartTimedOut marks a start that outlasted fx's StartTimeout.
var errStartTimedOut = errors.New("fxmodule: start timed out")

// start runs app.Start and enforces fx's StartTimeout itself. fx rolls a
// failed start back with the very context it was given and stops nothing
// once that context has ended, so app.Start gets one that never ends. A
// signal, or the StartTimeout passing (which Run treats as a stop request),
// cancels the OnStart hooks wrapped with [Abortable]; the one that aborts
// fails the start, and fx's rollback, with its live context, stops what had
// started (Module's OnStop drains first). A hook not wrapped finishes its
// start; if it is still running StopMargin after the StartTimeout, Run gives
// up on the start and drains what it can (the process is exiting).
func start(app *fx.App, m *lifecycle.Manager) error {
	done := make(chan error, 1)
	go func() { done <- app.Start(context.Background()) }()
	timeout := time.NewTimer(app.StartTimeout())
	defer timeout.Stop()
	select {
	case err := <-done:
		return err
	case <-timeout.C:
	}
	m.RequestStop(fmt.Sprintf("start timed out after %s", app.StartTimeout()))
	grace := time.NewTimer(StopMargin)
	defer grace.Stop()
	select {
	case err := <-done:
		return fmt.Errorf("%w after %s: %w", errStartTimedOut, app.StartTimeout(), err)
	case <-grace.C:
		return fmt.Errorf("%w after %s; an OnStart hook not wrapped with Abortable was still running %s later",
			errStartTimedOut, app.StartTimeout(), StopMargin)
	}
}

// Abortable wraps an OnStart function so that its context is also
// cancelled when a stop is requested (a signal during start-up). Wrap the
// start steps that can take long (warming caches, waiting for a
// dependency):
//
//	lc.Append(fx.Hook{OnStart: fxmodule.Abortable(m, warmCache)})
func Abortable(m *lifecycle.Manager, fn func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := m.WithStop(ctx)
		defer cancel()
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
// in two: DRAIN_TIMEOUT for the drain, the rest for the OnStop hooks, and
// refuses to start when the rest is shorter than StopMargin. So a process
// run by Run exits within StopTimeout of the first signal; set the pod's
// termination grace period above it.
const StopMargin = 5 * time.Second

// StopTimeoutFor returns fx.StopTimeout(cfg.DrainTimeout + StopMargin), the
// top-level option [Run] checks for. Read the config before fx.New to use
// it (lifecycle.ConfigFromEnv), since fx takes the option only there.
func StopTimeoutFor(cfg lifecycle.Config) fx.Option {
	return fx.StopTimeout(cfg.WithDefaults().DrainTimeout + StopMargin)
}
