package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule/internal/names"
	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// Value group names; contributors use [AsHook] and [AsCheck]
// rather than spelling the tags.
const (
	hookGroup  = "drainkit.hooks"
	checkGroup = "drainkit.checks"
)

// Module provides a *lifecycle.Manager, its *drain.Tracker and a
// *readiness.Registry reading the manager's state, and registers the drain
// hooks and readiness checks contributed to the groups. It needs a
// lifecycle.Config in the graph ([FromEnv] or fx.Supply); the graph's
// *slog.Logger and prometheus.Registerer, if any, are used by the registry,
// and by the manager when the config has none.
var Module = fx.Module("drainkit",
	fx.Provide(newManager, newTracker, newRegistry, names.NewOwners),
	fx.Invoke(wire),
)

// FromEnv provides the lifecycle.Config read by lifecycle.ConfigFromEnv; a
// bad variable makes Run exit with lifecycle.ExitConfig, naming it. An
// unset SERVICE_NAME or NODE_ID is logged with the name taken instead.
var FromEnv = fx.Provide(fromEnv)

func fromEnv(p loggerParams) (lifecycle.Config, error) {
	unset := map[string]bool{} // ConfigFromEnv fills the defaults in; only what it read tells
	cfg, err := lifecycle.ConfigFromEnv(func(k string) string {
		v := os.Getenv(k)
		unset[k] = v == ""
		return v
	})
	if err != nil {
		return cfg, err
	}
	if unset["SERVICE_NAME"] {
		logger(p.Logger).Info("fxmodule: SERVICE_NAME is unset: the service is named after its executable", "service", cfg.Service)
	}
	if unset["NODE_ID"] {
		// Two processes on one host would share it: their leases' sessions, say.
		logger(p.Logger).Info("fxmodule: NODE_ID is unset: the node is named after the host; set it per process if a host runs several",
			"service", cfg.Service, "node_id", cfg.NodeID)
	}
	return cfg, nil
}

// AsHook annotates a constructor returning a drain.Hook, or a slice of
// them (such as drain.HTTPHooks' or drain.Streams.Hooks'), so that its hooks
// join the drain: fx.Provide(fxmodule.AsHook(newSnapshotFlusher)). The
// constructor's first result type says which. Anything else is refused
// when the app is built (exit 78): fx would never call a constructor of
// another type, and the hook would be missing from the drain without a word.
func AsHook(constructor any) any {
	return asGroup("AsHook", "drain", constructor, hookType, hookGroup)
}

// AsCheck annotates a constructor returning a readiness.Check, or a slice
// of them, so that its checks join the ready probe; refused as [AsHook]'s
// are.
func AsCheck(constructor any) any {
	return asGroup("AsCheck", "ready probe", constructor, checkType, checkGroup)
}

var (
	hookType  = reflect.TypeFor[drain.Hook]()
	checkType = reflect.TypeFor[readiness.Check]()
)

// asGroup annotates constructor's first result, elem or []elem, into
// group; another is replaced by a constructor of elem that fails naming
// the mistake, since the group's reader (the drain, or the ready probe:
// joins) takes only elem.
func asGroup(option, joins string, constructor any, elem reflect.Type, group string) any {
	want := fmt.Sprintf("a %s or a []%s", elem, elem)
	t := reflect.TypeOf(constructor)
	joinsGroup := func(out reflect.Type) bool { return out == elem || isSliceOf(out, elem) }
	var err error
	switch {
	case t == nil || t.Kind() != reflect.Func:
		err = configerr.Errorf("fxmodule.%s(%v): want a constructor returning %s, such as func() %s", option, t, want, elem)
	case t.NumOut() == 0 || !joinsGroup(t.Out(0)):
		err = configerr.Errorf("fxmodule.%s(%v): the constructor's first result must be %s", option, t, want)
	case slices.ContainsFunc(slices.Collect(t.Outs())[1:], joinsGroup):
		err = configerr.Errorf("fxmodule.%s(%v): only the first result joins the %s; return a []%s for several", option, t, joins, elem)
	case t.Out(0) == elem:
		return fx.Annotate(constructor, fx.ResultTags(`group:"`+group+`"`))
	default: // a slice, of a named slice type too
		return fx.Annotate(constructor, fx.ResultTags(`group:"`+group+`,flatten"`))
	}
	refuse := reflect.MakeFunc(reflect.FuncOf(nil, []reflect.Type{elem, errorType}, false),
		func([]reflect.Value) []reflect.Value {
			return []reflect.Value{reflect.Zero(elem), reflect.ValueOf(&err).Elem()}
		})
	return fx.Annotate(refuse.Interface(), fx.ResultTags(`group:"`+group+`"`))
}

var errorType = reflect.TypeFor[error]()

func isSliceOf(t, elem reflect.Type) bool { return t.Kind() == reflect.Slice && t.Elem() == elem }

type managerParams struct {
	fx.In
	Config     lifecycle.Config
	Logger     *slog.Logger          `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
	// Signals fills Config.Signals when unset: a named value, so that a
	// test (fxmoduletest) need not decorate lifecycle.Config, which the
	// app under test may decorate itself (fx allows one at the root).
	Signals <-chan os.Signal `name:"drainkit.signals" optional:"true"`
}

// newManager fills the config's Logger and Registerer from the graph when
// unset. lifecycle.New's errors match lifecycle.ErrConfig (exit 78).
func newManager(p managerParams) (*lifecycle.Manager, error) {
	cfg := p.Config
	if cfg.Signals == nil {
		cfg.Signals = p.Signals
	}
	if cfg.Logger == nil {
		cfg.Logger = p.Logger
	}
	if cfg.Registerer == nil {
		cfg.Registerer = p.Registerer
	}
	return lifecycle.New(cfg)
}

func newTracker(m *lifecycle.Manager) *drain.Tracker { return m.Tracker() }

type registryParams struct {
	fx.In
	Manager    *lifecycle.Manager
	Logger     *slog.Logger          `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
}

func newRegistry(p registryParams) (*readiness.Registry, error) {
	c := p.Manager.Config()
	reg, err := readiness.New(readiness.Config{
		Service: c.Service, NodeID: c.NodeID, ReadyTimeout: c.ReadyTimeout,
		Logger: p.Logger, Registerer: p.Registerer,
	}, p.Manager.State)
	if err != nil {
		return nil, configerr.Wrap(err) // readiness.New has no other failure
	}
	p.Manager.OnTransition(reg.OnTransition) // status gauge and log at the flip, not at the next probe
	return reg, nil
}

type wireParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Manager   *lifecycle.Manager
	Registry  *readiness.Registry
	Names     *names.Owners
	Hooks     []drain.Hook      `group:"drainkit.hooks"`
	Checks    []readiness.Check `group:"drainkit.checks"`
	Driver    *driver           `optional:"true"`
}

// wire registers the contributed hooks and checks, and appends Module's
// OnStart hook, which refuses a start by anything but Run.
func wire(p wireParams) error {
	if err := p.Names.Add(p.Manager, names.ByApp, p.Hooks...); err != nil {
		return err
	}
	// Bounded: a check that ignores its context would otherwise hold the
	// whole drain to its deadline; its name is in the hook's error.
	closeHook := drain.Hook{Name: "readiness.close", Phase: drain.Close,
		Timeout: p.Manager.Config().ReadyTimeout, Run: p.Registry.Close}
	if err := p.Names.Add(p.Manager, names.ByModule, closeHook); err != nil {
		return err
	}
	for _, c := range p.Checks {
		if err := p.Registry.Add(c); err != nil {
			return configerr.Wrap(err)
		}
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			if p.Driver == nil {
				return ErrNotRun
			}
			return nil // Run marks the process running once every OnStart is done
		},
	})
	return nil
}

// logger is the first of loggers that is set, or slog.Default().
func logger(loggers ...*slog.Logger) *slog.Logger {
	for _, l := range loggers {
		if l != nil {
			return l
		}
	}
	return slog.Default()
}

// serviceLogger is the logger of the lines fxmodule writes itself: the
// app's, naming the service as lifecycle's own lines do.
func serviceLogger(l *slog.Logger, m *lifecycle.Manager) *slog.Logger {
	return logger(l).With("service", m.Config().Service)
}

// ErrNotRun is returned by Module's OnStart hook when the app is started by
// anything but [Run] (app.Run, app.Start, fxtest), which would mark the
// process ready too early and drain too late.
var ErrNotRun = errors.New("fxmodule: an app with fxmodule.Module must be run by fxmodule.Run, not app.Run, app.Start or fxtest")
