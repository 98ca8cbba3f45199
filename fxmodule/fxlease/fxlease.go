// Package fxlease adds a *lease.Manager to an fx app run by fxmodule.Run.
// It is a package of its own so that fxmodule does not link go-redis for
// services that hold no leases, as fxgrpc keeps grpc-go out.
//
// # Usage
//
//	fxmodule.Run(
//		fxmodule.Module, fxmodule.FromEnv, fxlease.Module,
//		fx.Provide(func() redis.UniversalClient {
//			return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1})
//		}),
//	)
//
// The client must fit leases (docs/leases.md, "The client you give it"):
// Run refuses one that does not with exit code 78 and one line listing
// each option to change. A lease.Config in the graph is optional.
package fxlease

import (
	"cmp"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/lease"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// Module provides a *lease.Manager over the graph's
// redis.UniversalClient, configured by the graph's lease.Config if there
// is one: its zero fields take their defaults, Node the lifecycle's
// NODE_ID, Logger and Registerer the graph's; nothing fills in Addr, which
// [lease.Manager.Owner] gives other nodes to forward to. It starts the
// session on start, closes the drain gate at the flip, contributes the
// Release phase hook and a gating readiness check "redis_lease", and stops
// the Manager on stop. The per-room hand-off is the service's: contribute
// it with fxmodule.AsHook(func(m *lease.Manager) (drain.Hook, error) {
// return m.HandOff(flushRoom, n) }).
var Module = fx.Module("drainkit.lease",
	fx.Provide(newManager),
	fx.Provide(fxmodule.AsHook(func(l *lease.Manager) drain.Hook { return l.ReleaseHook() })),
	fx.Provide(fxmodule.AsCheck(func(l *lease.Manager) readiness.Check {
		return readiness.Check{Name: "redis_lease", Tier: readiness.Gating, Timeout: lease.ProbeTimeout, Probe: l.Probe}
	})),
)

type params struct {
	fx.In
	Lifecycle fx.Lifecycle
	Manager   *lifecycle.Manager
	Client    redis.UniversalClient
	// Optional: every field has a default, so requiring one only made a
	// new app fail with dig's "missing type: lease.Config".
	Config     lease.Config          `optional:"true"`
	Logger     *slog.Logger          `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
}

// newManager builds the lease manager. lease.New's errors match
// lifecycle.ErrConfig, so a client or config it refuses makes Run exit
// with lifecycle.ExitConfig.
func newManager(p params) (*lease.Manager, error) {
	cfg := p.Config
	if cfg.Node == "" {
		cfg.Node = p.Manager.Config().NodeID
	}
	if cfg.Logger == nil { // the app's, with the service named as on lifecycle's own lines
		cfg.Logger = cmp.Or(p.Logger, slog.Default()).With("service", p.Manager.Config().Service)
	}
	if cfg.Registerer == nil {
		cfg.Registerer = p.Registerer
	}
	l, err := lease.New(p.Client, cfg)
	if err != nil {
		return nil, err
	}
	p.Manager.OnTransition(func(t lifecycle.Transition) {
		if t.To == lifecycle.Draining {
			l.BeginDrain()
		}
	})
	p.Lifecycle.Append(fx.Hook{
		OnStart: fxmodule.Abortable(p.Manager, l.Start), // a signal or StartTimeout ends its retries
		OnStop:  l.Stop,                                 // the report names it after newManager, which appended it
	})
	return l, nil
}
