package fxmodule_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/lease"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

func TestLeaseModule(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
	var (
		leases *lease.Manager
		m      *lifecycle.Manager
		reg    *readiness.Registry
	)
	a := fxmoduletest.Start(t,
		fxmodule.Module, fxmodule.LeaseModule,
		fx.Supply(lifecycle.Config{Service: "room-service", NodeID: "node-a", DrainTimeout: 10 * time.Second}),
		fx.StopTimeout(10*time.Second+fxmodule.StopMargin),
		fx.Supply(lease.Config{Addr: "127.0.0.1:13001", TTL: 3 * time.Second}, quiet()),
		fx.Provide(func(lc fx.Lifecycle) redis.UniversalClient {
			lc.Append(fx.Hook{OnStop: func(context.Context) error { return rdb.Close() }})
			return rdb
		}),
		fx.Populate(&leases, &m, &reg),
	)
	ctx := context.Background()
	hb, err := srv.Client().HGetAll(ctx, "room:node:{node-a}").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, hb, "the heartbeat is written at start")

	l, err := leases.Acquire(ctx, "42")
	require.NoError(t, err)
	rep := reg.Ready(ctx)
	require.Equal(t, readiness.StatusOK, rep.Status, "%+v", rep)
	assert.Equal(t, "redis_lease", rep.Checks[0].Name)

	require.Equal(t, lifecycle.ExitClean, a.Stop().ExitCode)
	assert.Equal(t, lifecycle.Stopped, m.State())
	_, err = leases.Acquire(ctx, "43")
	assert.ErrorIs(t, err, lease.ErrDraining, "the gate closed at the flip")
	<-l.Context().Done()
	n, err := srv.Client().Exists(ctx, "room:route:{42}", "room:node:{node-a}").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the lease was released and the heartbeat deleted by the drain")
}
