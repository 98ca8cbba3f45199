package fxlease_test

import (
	"context"
	"errors"
	"net/http"
	"os"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxlease"
	"github.com/drainkit/drainkit/lease"
)

// An HTTP service that owns rooms through leases: the client fits leases
// (one retry at most, context deadlines honoured), and no lease.Config is
// needed for the defaults.
func Example() {
	newRedis := func(lc fx.Lifecycle) redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), MaxRetries: 1, ContextTimeoutEnabled: true})
		lc.Append(fx.Hook{OnStop: func(context.Context) error { return rdb.Close() }})
		return rdb
	}
	rooms := func(leases *lease.Manager) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			l, err := leases.Acquire(r.Context(), r.URL.Query().Get("room"))
			if errors.Is(err, lease.ErrHeld) {
				http.Error(w, err.Error(), http.StatusConflict) // the error names the holder
				return
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			_ = l.Token() // pass it with every write, so storage refuses a stale owner
		})
	}
	os.Exit(fxmodule.Run(
		fxmodule.Module, fxmodule.FromEnv, fxlease.Module,
		fx.Provide(newRedis),
		fxmodule.HTTP("api", ":8080", rooms),
	))
}

// A room taken as the service starts: in an OnStart hook of a function
// that takes the *lease.Manager, so it runs after the Manager's own start
// (fx runs a constructor before what depends on it, and OnStart hooks in
// the order they were appended). Acquire answers lease.ErrNotRunning
// before that start and, after the flip, lease.ErrDraining for a room
// not held.
func Example_atStart() {
	newRedis := func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), MaxRetries: 1, ContextTimeoutEnabled: true})
	}
	takeHomeRoom := func(lc fx.Lifecycle, leases *lease.Manager) {
		lc.Append(fx.Hook{OnStart: func(ctx context.Context) error {
			_, err := leases.Acquire(ctx, "home") // a failed start if another node holds it
			return err
		}})
	}
	os.Exit(fxmodule.Run(
		fxmodule.Module, fxmodule.FromEnv, fxlease.Module,
		fx.Provide(newRedis),
		fx.Invoke(takeHomeRoom),
	))
}
