package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/drainkit/drainkit/lifecycle"
)

// driver marks an app driven by Run, which owns signals and ordering.
type driver struct{}

type loggerParams struct {
	fx.In
	Logger *slog.Logger `optional:"true"`
}

// SlogEvents sends fx's own events to the graph's *slog.Logger (or
// slog.Default()), so fx and drainkit log through one handler. Run adds it.
// Routine events (provided, invoked, hook executed) log at Debug so that a
// service's Info log shows its own story; fx's errors stay at Error.
var SlogEvents = fx.WithLogger(func(p loggerParams) fxevent.Logger {
	l := p.Logger
	if l == nil {
		l = slog.Default()
	}
	fl := &fxevent.SlogLogger{Logger: l}
	fl.UseLogLevel(slog.LevelDebug)
	return fl
})

// TimeoutError is returned when fx's StopTimeout is shorter than
// DRAIN_TIMEOUT: fx would cancel the drain before its own deadline.
type TimeoutError struct {
	// Stop is fx's StopTimeout and Drain is DRAIN_TIMEOUT, as durations.
	Stop, Drain string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("fxmodule: fx StopTimeout %s is shorter than DRAIN_TIMEOUT %s: raise it with fx.StopTimeout at the top level of fx.New, or lower DRAIN_TIMEOUT", e.Stop, e.Drain)
}

// Run builds an fx app from opts (which must include [Module] and a
// lifecycle.Config), runs it and returns the process exit code (see the
// lifecycle Exit… constants). Use it in place of app.Run:
//
//	func main() { os.Exit(fxmodule.Run(fxmodule.Module, fxmodule.FromEnv, …)) }
//
// Unlike app.Run it:
//   - refuses to start (ExitConfig) when fx's StopTimeout is shorter than
//     DRAIN_TIMEOUT, naming both: fx.StopTimeout belongs to the top-level
//     app, so it is read back with App.StopTimeout() rather than set here;
//   - owns signal handling: the first SIGTERM/SIGINT drains, the second
//     forces, the third exits (fx's own handler would swallow the second);
//   - aborts a start in progress on a signal: OnStart hooks wrapped with
//     [Abortable] see their context cancelled, and fx stops what had started;
//   - marks the process Running only after every OnStart has returned, and
//     drains before fx runs any OnStop hook, so readiness has flipped and
//     in-flight work has finished before anything is closed.
func Run(opts ...fx.Option) int {
	var m *lifecycle.Manager
	app := fx.New(append([]fx.Option{SlogEvents}, append(opts,
		fx.Supply(&driver{}),
		fx.Populate(&m),
	)...)...)
	return run(app, m)
}

func run(app *fx.App, m *lifecycle.Manager) int {
	if err := app.Err(); err != nil {
		slog.Error("fxmodule: cannot build the app", "err", err)
		var ce *lifecycle.ConfigError
		if errors.As(err, &ce) {
			return lifecycle.ExitConfig
		}
		return lifecycle.ExitStartFailed
	}
	if stop, drainT := app.StopTimeout(), m.Config().DrainTimeout; stop < drainT {
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
	aborted := isAbort(m) // before Shutdown, which requests a stop itself
	if startErr != nil {
		reason = "start failed: " + startErr.Error()
	}
	r := m.Shutdown(context.Background(), reason) // the drain, before any OnStop
	stopErr := stop(app, m, r.Forced)

	if startErr != nil && !aborted {
		r.StartFailed(startErr)
	}
	code := r.ExitCode
	if stopErr != nil && code == lifecycle.ExitClean {
		code = lifecycle.ExitHookFailed
	}
	if stopErr != nil {
		slog.Error("fxmodule: stop", "err", stopErr)
	}
	return code
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

// start runs app.Start under StartTimeout. It does not cancel that context
// on a signal: fx rolls a failed start back with the very context it was
// given, and stops nothing once it is cancelled. A signal instead cancels
// the OnStart hooks wrapped with [Abortable]; the one that aborts fails the
// start, and fx's rollback, with a live context, stops what had started
// (Module's OnStop drains first). Hooks not wrapped finish their start, and
// Run stops the app right after.
func start(app *fx.App, m *lifecycle.Manager) error {
	ctx, cancel := context.WithTimeout(context.Background(), app.StartTimeout())
	defer cancel()
	return app.Start(ctx)
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

// stop runs app.Stop for what is left of the drain's budget, so the
// process still exits by DRAIN_TIMEOUT (StopTimeout only bounds it further);
// a forced or overrun drain leaves nothing, so fx's OnStop hooks are told
// not to wait.
func stop(app *fx.App, m *lifecycle.Manager, forced bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), app.StopTimeout())
	defer cancel()
	if deadline, ok := m.Deadline(); ok {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, deadline)
		defer cancelDeadline()
	}
	if forced {
		cancel()
	}
	return app.Stop(ctx)
}

// StopMargin is what [StopTimeoutFor] adds to DRAIN_TIMEOUT: time for the
// OnStop hooks that run after the drain (closing clients).
const StopMargin = 5 * time.Second

// StopTimeoutFor returns fx.StopTimeout(cfg.DrainTimeout + StopMargin), the
// top-level option [Run] checks for. Read the config before fx.New to use
// it (lifecycle.ConfigFromEnv), since fx takes the option only there.
func StopTimeoutFor(cfg lifecycle.Config) fx.Option {
	return fx.StopTimeout(cfg.WithDefaults().DrainTimeout + StopMargin)
}
