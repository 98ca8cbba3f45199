package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/internal/configerr"
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
// at SIGTERM/SIGINT or an fx.Shutdowner call (whose exit code it cannot
// read: see docs/fxmodule.md) before fx runs any OnStop
// hook, which then get fx's StopTimeout. A failed start drains too, before
// fx rolls back the OnStart hooks that ran; neither it nor the drain of an
// aborted start runs a Flush hook: drain hooks are all in the graph, and a
// flush would write out state never loaded. Run uses fx's documented API only: an fx.WithLogger of the app's
// changes nothing of the drain. docs/fxmodule.md has the order, the
// budgets, how a start is aborted ([Abortable]) and the exit codes.
func Run(opts ...fx.Option) int {
	var (
		m        *lifecycle.Manager
		app      *fx.App
		d        = &driver{}
		graphLog *slog.Logger // set while fx builds the app, if the graph has one
	)
	ctx, requestStop := context.WithCancelCause(context.Background())
	defer requestStop(nil)
	app = fx.New(append([]fx.Option{eventLogger(&graphLog)}, append(opts,
		fx.Supply(d),
		fx.Decorate(func(lc fx.Lifecycle) fx.Lifecycle { return hookLifecycle{lc, d} }),
		fx.Decorate(func(fx.Shutdowner) fx.Shutdowner { return shutdowner{requestStop} }),
		fx.Invoke(func(p struct {
			fx.In
			M *lifecycle.Manager `optional:"true"`
		}) {
			m = p.M
		}),
	)...)...)
	if err := app.Err(); err != nil {
		return refuseToBuild(logger(graphLog), err)
	}
	if m == nil {
		return refuseToBuild(logger(graphLog), configerr.Errorf("fxmodule: the app has no *lifecycle.Manager: add fxmodule.Module to fxmodule.Run's options"))
	}
	d.app, d.m = app, m
	c := m.Config()
	logger(c.Logger).Info("fxmodule: exit within drain_timeout + stop_timeout of the first signal (fx's OnStop hooks run after the drain): "+
		"set the pod's terminationGracePeriodSeconds above exit_within", "service", c.Service, "node_id", c.NodeID,
		"drain_timeout", c.DrainTimeout.String(), "stop_timeout", app.StopTimeout().String(), "exit_within", saturatingSum(c.DrainTimeout, app.StopTimeout()).String())
	m.OnDrained(d.stopApp)
	m.OnStart(d.start)
	return m.Run(ctx).ExitCode
}

// shutdowner is the app's fx.Shutdowner under Run: a shutdown stops the
// app like a first signal. fx's own would signal only app.Wait and
// app.Done, which Run does not use: they subscribe to the process's
// signals, which the manager handles (and a subscription inside a
// testing/synctest bubble is fatal). So fx.ExitCode cannot be read, and a
// shutdown given options is still done but returns an error saying so:
// the exit code is the drain's.
type shutdowner struct{ requestStop context.CancelCauseFunc }

// errShutdownOptions is what Shutdown returns when given options.
var errShutdownOptions = errors.New("fxmodule: fx.Shutdowner options (fx.ExitCode) are not used under fxmodule.Run: " +
	"the app stops, and its exit code is the drain's (docs/fxmodule.md)")

func (s shutdowner) Shutdown(opts ...fx.ShutdownOption) error {
	s.requestStop(errors.New("fx.Shutdowner: shutdown requested"))
	if len(opts) > 0 {
		return errShutdownOptions
	}
	return nil
}

// driver is what Run keeps of one app: the app, the context that
// [Abortable] start hooks watch, and what its wrapped hooks noted.
type driver struct {
	app   *fx.App
	m     *lifecycle.Manager
	stops stopResults

	mu         sync.Mutex
	abortCtx   context.Context // ends at a stop request or at fx's StartTimeout
	startErr   error           // the first OnStart hook's error
	rollbackBy time.Time       // a rollback's OnStop hooks end by then; zero if none drained
}

// startFailed notes the error of an OnStart hook, the reason of the drain
// that fx's rollback starts.
func (d *driver) startFailed(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.startErr == nil {
		d.startErr = err
	}
}

// drainBeforeRollback is run before every OnStop hook, and returns the
// context to run it with. After a stop request Run has drained already
// (the state is Stopped) and fx's StopTimeout bounds the hook. Otherwise
// fx is rolling a failed start back, with the context app.Start was given,
// and the drain comes first, so that the rollback closes nothing the drain
// hooks still use; the rollback's hooks then get fx's StopTimeout from the
// drain's end, as after a stop, not what is left of the start's budget. A
// stop requested during the start keeps its own reason: Shutdown's first
// caller wins.
func (d *driver) drainBeforeRollback(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.m.State() < lifecycle.Draining {
		d.drainFailedStart(ctx)
	}
	d.mu.Lock()
	by := d.rollbackBy
	d.mu.Unlock()
	if by.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, by)
}

// drainFailedStart drains a start that fx is rolling back, and says what
// failed when the report does not: a stop requested before the rollback
// drains as that stop, exit 0 (docs/fxmodule.md: a known limitation).
func (d *driver) drainFailedStart(ctx context.Context) {
	reason := "start failed"
	d.mu.Lock()
	abort, err := d.abortCtx, d.startErr
	d.mu.Unlock()
	if abort != nil && errors.Is(context.Cause(abort), errStartTimedOut) {
		reason = fmt.Sprintf("start timed out after %s", d.app.StartTimeout())
	}
	if err != nil { // what the hook that failed or timed out said
		reason += ": " + err.Error()
	}
	rep := d.m.Shutdown(context.WithoutCancel(ctx), reason) // the drain has a deadline of its own
	d.mu.Lock()
	d.rollbackBy = time.Now().Add(d.app.StopTimeout())
	d.mu.Unlock()
	if err != nil && rep.StartError == "" && !errors.Is(err, context.Canceled) {
		c := d.m.Config()
		logger(c.Logger).Warn("fxmodule: an OnStart hook failed while a stop was requested; the drain reported the stop, not this failure",
			"service", c.Service, "node_id", c.NodeID, "error", err.Error())
	}
}

// driverKey finds the *driver in the context of fx's OnStart hooks, for
// [Abortable]: no table of drivers outlives its app.
type driverKey struct{}

// errStartTimedOut marks a start that outlasted fx's StartTimeout.
var errStartTimedOut = errors.New("fxmodule: start timed out")

// start is the manager's one start step: fx's whole start. A stop request
// (ctx) or fx's StartTimeout cancels the [Abortable] hooks. fx rolls back
// with the context app.Start was given and stops nothing once it has
// ended, so that context also lasts the drain and fx's StopTimeout.
func (d *driver) start(ctx context.Context) error {
	abort, cancel := context.WithTimeoutCause(ctx, d.app.StartTimeout(), errStartTimedOut)
	defer cancel()
	d.mu.Lock()
	d.abortCtx = abort
	d.mu.Unlock()

	budget := saturatingSum(d.app.StartTimeout(), d.m.Config().DrainTimeout, d.app.StopTimeout())
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
// is fx's StopTimeout, after the drain and not what it left: a forced or
// late drain leaves nothing, and closing clients matters most then. During
// a rollback fx is stopping already, and app.Stop returns at once: the
// rollback's hooks run after this drain, and are in fx's log, not the
// report.
func (d *driver) stopApp() []drain.HookResult {
	ctx, cancel := context.WithTimeout(context.Background(), d.app.StopTimeout())
	defer cancel()
	err := d.app.Stop(ctx)
	return d.stops.take(err, ctx.Err() != nil)
}

// saturatingSum adds budgets, at most the longest duration: fx takes
// fx.StopTimeout(math.MaxInt64) for "no limit", which a plain sum would
// wrap into a deadline already past.
func saturatingSum(ds ...time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		if d > math.MaxInt64-sum {
			return math.MaxInt64
		}
		sum += d
	}
	return sum
}
