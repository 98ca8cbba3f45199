package fxmodule

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/internal/leaseinternal"
	"github.com/drainkit/drainkit/lease"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// LeaseModule provides a *lease.Manager over the graph's
// redis.UniversalClient and a lease.Config (Node defaults to the
// lifecycle's NODE_ID). It closes the lease gate at the flip, starts the
// renewer (writing the node heartbeat) on start, contributes the Release
// phase hook and a gating readiness check "redis_lease", and stops the
// renewer on stop. The per-room hand-off is the service's: set
// lease.Config.HandOff and contribute leases.HandOff(flushRoom, n) with
// [AsHook] (a constructor may return the hook and its error).
var LeaseModule = fx.Module("drainkit.lease",
	fx.Provide(newLeaseManager),
	fx.Provide(AsHook(func(l *lease.Manager) drain.Hook { return l.ReleaseHook() })),
	fx.Provide(AsCheck(func(l *lease.Manager) readiness.Check {
		return readiness.Check{Name: "redis_lease", Tier: readiness.Gating, Timeout: lease.ProbeTimeout, Probe: l.Probe}
	})),
)

type leaseParams struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Manager    *lifecycle.Manager
	Client     redis.UniversalClient
	Config     lease.Config
	Logger     *slog.Logger          `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
}

func newLeaseManager(p leaseParams) (*lease.Manager, error) {
	cfg := p.Config
	if cfg.Node == "" {
		cfg.Node = managerConfig(p.Manager).NodeID
	}
	if cfg.Logger == nil {
		cfg.Logger = p.Logger
	}
	if cfg.Registerer == nil {
		cfg.Registerer = p.Registerer
	}
	if cfg.Draining == nil {
		cfg.Draining = func() bool { return p.Manager.State() >= lifecycle.Draining }
	}
	l, err := lease.New(p.Client, cfg)
	if err != nil {
		return nil, err
	}
	p.Manager.OnTransition(func(t lifecycle.Transition) { // the heartbeat says draining at once
		if t.To == lifecycle.Draining {
			leaseinternal.BeginDrain(l)
		}
	})
	p.Lifecycle.Append(fx.Hook{
		OnStart: Abortable(p.Manager, l.Start), // a signal or StartTimeout ends its retries
		OnStop:  func(ctx context.Context) error { return l.Stop(ctx) },
	})
	return l, nil
}
