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
// lifecycle.Config), runs it in place of app.Run and returns the process
// exit code, one of the lifecycle Exit… constants:
//
//	func main() { os.Exit(fxmodule.Run(fxmodule.Module, fxmodule.FromEnv, …)) }
//
// The process is Running once every OnStart hook has returned; it drains
// at SIGTERM/SIGINT before fx runs any OnStop hook, which get the rest of
// fx's StopTimeout. A failed start drains too, before fx rolls back the
// OnStart hooks that ran, but runs no Flush hook: drain hooks are all in
// the graph, and a flush would write out state never loaded. docs/fxmodule.md has the order, the budgets, how a
// start is aborted ([Abortable]) and the exit codes.
func Run(opts ...fx.Option) int {
	var (
		m   *lifecycle.Manager
		app *fx.App
		rec = &stopRecorder{}
		d   = &driver{}
	)
	ctx, requestStop := context.WithCancelCause(context.Background())
	defer requestStop(nil)
	var stopTimeout time.Duration // fx's, or derived from DRAIN_TIMEOUT
	afterDrain := func() []drain.HookResult {
		return stopApp(app, rec, stopTimeout-m.Config().DrainTimeout)
	}
	app = fx.New(append([]fx.Option{eventLogger(rec), fx.StopTimeout(noStopTimeout)}, append(opts,
		fx.Supply(d),
		fx.Decorate(func(fx.Shutdowner) fx.Shutdowner { return shutdowner{requestStop} }),
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
	rec.onRollback = d.rollingBack
	m.OnStart(d.start)
	return m.Run(ctx).ExitCode
}

// shutdowner replaces fx's Shutdowner, which would signal app.Run's
// receivers, unused under Run: a shutdown stops the app like a first
// signal, and fx.ExitCode is ignored (the exit code is the drain's).
type shutdowner struct{ requestStop context.CancelCauseFunc }

func (s shutdowner) Shutdown(...fx.ShutdownOption) error {
	s.requestStop(errors.New("fx.Shutdowner: shutdown requested"))
	return nil
}

// driver is what Run keeps of one app: the app, and the context that
// [Abortable] start hooks watch.
type driver struct {
	app *fx.App
	m   *lifecycle.Manager

	mu          sync.Mutex
	abortCtx    context.Context // ends at a stop request or at fx's StartTimeout
	rollbackErr error           // why fx rolls the start back, from its events
}

// rollingBack drains at fx's RollingBack event, which fx sends before any
// OnStop hook, so the rollback closes nothing the drain hooks still use.
func (d *driver) rollingBack(err error) {
	d.mu.Lock()
	d.rollbackErr = err
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
	return d.rollbackErr
}

// driverKey finds the *driver in the context of fx's OnStart hooks, for
// [Abortable]: no table of drivers outlives its app.
type driverKey struct{}

// errStartTimedOut marks a start that outlasted fx's StartTimeout.
var errStartTimedOut = errors.New("fxmodule: start timed out")

// start is the manager's one start step: fx's whole start. A stop request
// (ctx) or fx's StartTimeout cancels the [Abortable] hooks. fx rolls back
// with the context app.Start was given and stops nothing once it has
// ended, so that context also lasts the drain and StopMargin.
func (d *driver) start(ctx context.Context) error {
	abort, cancel := context.WithTimeoutCause(ctx, d.app.StartTimeout(), errStartTimedOut)
	defer cancel()
	d.mu.Lock()
	d.abortCtx = abort
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
	return d.abortCtx
}

// Abortable wraps an OnStart function so that its context is also
// cancelled when a stop is requested during the start or fx's StartTimeout
// passes. Wrap the start steps that can take long (warming caches, waiting
// for a dependency):
//
//	lc.Append(fx.Hook{OnStart: fxmodule.Abortable(m, warmCache)})
//
// It takes effect only under [Run] (fxmoduletest included).
func Abortable(m *lifecycle.Manager, fn func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if d, ok := ctx.Value(driverKey{}).(*driver); ok && d.m == m {
			if abort := d.abortContext(); abort != nil {
				var cancel context.CancelCauseFunc
				ctx, cancel = context.WithCancelCause(ctx)
				stopRelay := context.AfterFunc(abort, func() { cancel(context.Cause(abort)) })
				defer func() { stopRelay(); cancel(nil) }()
			}
		}
		return fn(ctx)
	}
}

// stopApp runs fx's OnStop hooks and returns how each ended. Their budget
// is their own, not what the drain left: a forced or late drain leaves
// nothing, and closing clients matters most then.
func stopApp(app *fx.App, rec *stopRecorder, budget time.Duration) []drain.HookResult {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	err := app.Stop(ctx)
	return rec.results(err, time.Since(start))
}

// StopMargin is the least time [Run] leaves fx's OnStop hooks after the
// drain: an app that sets no fx.StopTimeout gets DRAIN_TIMEOUT + StopMargin,
// and one that sets a shorter one is refused.
const StopMargin = 5 * time.Second

// noStopTimeout, given to fx before the app's options, tells an app that
// set no fx.StopTimeout from one that chose fx's default.
const noStopTimeout = -1

// stopTimeoutOf is app's stop timeout: drainTimeout + StopMargin when the
// app set none, or the app's own if it leaves at least StopMargin.
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

// StopTimeoutFor returns fx.StopTimeout(cfg.DrainTimeout + StopMargin),
// what [Run] takes when the app sets none. Give it to Run, not inside an
// fx.Module (fx refuses it there).
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
