package fxmodule

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/internal/lifecycleinternal"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// Value group names; contributors use [AsHook], [AsHooks] and [AsCheck]
// rather than spelling the tags.
const (
	hookGroup  = "drainkit.hooks"
	checkGroup = "drainkit.checks"
)

// Module provides a *lifecycle.Manager, its *drain.Tracker and a
// *readiness.Registry reading the manager's state, and registers every
// drain hook and readiness check contributed to the groups; [Run] drains
// before fx stops anything. It needs a lifecycle.Config in the graph
// ([FromEnv] or fx.Supply); a *slog.Logger and a prometheus.Registerer in
// the graph are used by the registry, and by the manager when the config's
// own Logger or Registerer is nil.
var Module = fx.Module("drainkit",
	fx.Provide(newManager, newTracker, newRegistry),
	fx.Invoke(wire),
)

// FromEnv provides the lifecycle.Config read by lifecycle.ConfigFromEnv; a
// bad variable makes Run exit with lifecycle.ExitConfig.
var FromEnv = fx.Provide(func() (lifecycle.Config, error) {
	cfg, err := lifecycle.ConfigFromEnv(nil)
	if err != nil {
		return cfg, &configError{err}
	}
	return cfg, nil
})

// AsHook annotates a constructor returning a drain.Hook so that its hook
// joins the drain: fx.Provide(fxmodule.AsHook(newSnapshotFlusher)).
func AsHook(constructor any) any {
	return fx.Annotate(constructor, fx.ResultTags(`group:"`+hookGroup+`"`))
}

// AsHooks is AsHook for a constructor returning []drain.Hook, such as
// one wrapping drain.HTTPHooks.
func AsHooks(constructor any) any {
	return fx.Annotate(constructor, fx.ResultTags(`group:"`+hookGroup+`,flatten"`))
}

// AsCheck annotates a constructor returning a readiness.Check so that the
// check joins the ready probe.
func AsCheck(constructor any) any {
	return fx.Annotate(constructor, fx.ResultTags(`group:"`+checkGroup+`"`))
}

type managerParams struct {
	fx.In
	Config     lifecycle.Config
	Logger     *slog.Logger          `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
}

// newManager builds the manager from the config in the graph; the graph's
// logger and registerer fill the config's when it has none. A config the
// manager refuses is a configError, so that Run exits with ExitConfig.
func newManager(p managerParams) (*lifecycle.Manager, error) {
	cfg := p.Config
	if cfg.Logger == nil {
		cfg.Logger = p.Logger
	}
	if cfg.Registerer == nil {
		cfg.Registerer = p.Registerer
	}
	m, err := lifecycle.New(cfg)
	if err != nil {
		return nil, &configError{err}
	}
	return m, nil
}

// configError is a lifecycle.Config that lifecycle.New or ConfigFromEnv
// refused.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// managerConfig is the configuration m runs with, defaults applied.
func managerConfig(m *lifecycle.Manager) lifecycle.Config {
	return lifecycleinternal.Config(m).(lifecycle.Config)
}

func newTracker(m *lifecycle.Manager) *drain.Tracker { return m.Tracker() }

type registryParams struct {
	fx.In
	Manager    *lifecycle.Manager
	Logger     *slog.Logger          `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
}

func newRegistry(p registryParams) (*readiness.Registry, error) {
	c := managerConfig(p.Manager)
	reg, err := readiness.New(readiness.Config{
		Service: c.Service, NodeID: c.NodeID, ReadyTimeout: c.ReadyTimeout,
		Logger: p.Logger, Registerer: p.Registerer,
	}, p.Manager.State)
	if err != nil {
		return nil, err
	}
	p.Manager.OnTransition(reg.OnTransition) // status gauge and log at the flip, not at the next probe
	return reg, nil
}

type wireParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Manager   *lifecycle.Manager
	Registry  *readiness.Registry
	Hooks     []drain.Hook      `group:"drainkit.hooks"`
	Checks    []readiness.Check `group:"drainkit.checks"`
	Driver    *driver           `optional:"true"`
}

// wire registers the contributed hooks and checks and appends the drain's
// OnStop hook. Taking the groups makes fx build every contributor, and so
// every dependency a hook uses, before this runs: their OnStop hooks are
// appended earlier and so run later than the drain (fx stops in reverse).
func wire(p wireParams) error {
	if err := p.Manager.AddHook(p.Hooks...); err != nil {
		return err
	}
	// Bounded: a check that ignores its context would otherwise hold the
	// whole drain to its deadline; its name is in the hook's error.
	closeHook := drain.Hook{Name: "readiness.close", Phase: drain.Close,
		Timeout: managerConfig(p.Manager).ReadyTimeout, Run: p.Registry.Close}
	if err := p.Manager.AddHook(closeHook); err != nil {
		return err
	}
	for _, c := range p.Checks {
		if err := p.Registry.Add(c); err != nil {
			return err
		}
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			if p.Driver == nil {
				return ErrNotRun
			}
			return nil // Run marks the process running once every OnStart is done
		},
		OnStop: moduleStop(p.Manager, p.Driver),
	})
	return nil
}

// ErrNotRun is returned by Module's OnStart hook when the app is started by
// anything but [Run] (app.Run, app.Start, fxtest): fx alone would mark the
// process ready before later OnStart hooks had returned, drain after some
// OnStop hooks had already closed what the drain needs, and swallow the
// second signal.
var ErrNotRun = errors.New("fxmodule: an app with fxmodule.Module must be run by fxmodule.Run, not app.Run, app.Start or fxtest")

// moduleStop is Module's OnStop hook. Under [Run] fx stops the app after
// the drain, when the state is Stopped, and when fx rolls a failed start
// back Run has drained at fx's RollingBack event already. The drain here
// is the fallback for an app whose fx.WithLogger replaced Run's event
// recorder: it still comes before the OnStop hooks of what Module's
// contributors use.
func moduleStop(m *lifecycle.Manager, d *driver) func(context.Context) error {
	return func(ctx context.Context) error {
		if m.State() == lifecycle.Stopped {
			return nil
		}
		reason := "start failed"
		if err := d.rollbackCause(); err != nil {
			reason += ": " + err.Error()
		}
		m.Shutdown(context.WithoutCancel(ctx), reason) // the drain has a deadline of its own
		return nil
	}
}
