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
// (one retry at most, context deadlines honoured), and lease.Config.Addr is
// the address other instances reach this one at, which Owner gives them to
// forward a room's requests (nothing fills it in). A room another instance
// holds is sent there, also while this one drains; one nobody holds while
// this one drains gets a 503 with Retry-After, for the client (or a gateway
// in front) to try another instance.
func Example() {
	newRedis := func(lc fx.Lifecycle) redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), MaxRetries: 1, ContextTimeoutEnabled: true})
		lc.Append(fx.Hook{OnStop: func(context.Context) error { return rdb.Close() }})
		return rdb
	}
	unavailable := func(w http.ResponseWriter, err error) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	}
	rooms := func(leases *lease.Manager) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.URL.Query().Get("room")
			l, err := leases.Acquire(r.Context(), id)
			switch {
			case errors.Is(err, lease.ErrInvalidID):
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			case errors.Is(err, lease.ErrHeld): // also once this instance drains
				owner, err := leases.Owner(r.Context(), id)
				if err != nil || owner.Addr == "" { // released or moved meanwhile: a retry finds it
					unavailable(w, errors.Join(err, errors.New("owner unknown")))
					return
				}
				// A redirect is shortest; a proxy (net/http/httputil.ReverseProxy) that resends a
				// forward the owner refuses while it drains (503, Retry-After) keeps clients out of it.
				http.Redirect(w, r, "http://"+owner.Addr+r.URL.RequestURI(), http.StatusTemporaryRedirect)
				return
			case err != nil: // lease.ErrDraining: nobody holds it and this instance takes none
				unavailable(w, err)
				return
			}
			_ = l.Token() // pass it with every write, so storage refuses a stale owner
		})
	}
	os.Exit(fxmodule.Run(
		fxmodule.Module, fxmodule.FromEnv, fxlease.Module,
		fx.Provide(newRedis),
		fx.Supply(lease.Config{Addr: os.Getenv("ADVERTISE_ADDR")}), // e.g. the pod's IP and this port
		fxmodule.HTTP("api", ":8080", rooms),
	))
}

// takeHomeRoom takes room "home" as the service starts, in an OnStart hook
// of a function that takes the *lease.Manager, so it runs after the
// Manager's own start (fx runs a constructor before what depends on it,
// and OnStart hooks in the order they were appended). A room another node
// holds is no failed start: during a rolling update that node is the
// instance this one replaces, which drains only once this one is ready;
// its requests are forwarded there until its hand-off frees the room.
func takeHomeRoom(lc fx.Lifecycle, leases *lease.Manager) {
	lc.Append(fx.Hook{OnStart: func(ctx context.Context) error {
		_, err := leases.Acquire(ctx, "home")
		if errors.Is(err, lease.ErrHeld) {
			return nil // served elsewhere for now; a request for it acquires it once free
		}
		return err
	}})
}

// A room taken as the service starts (takeHomeRoom). Acquire answers
// lease.ErrNotRunning before the Manager's start and, after the flip,
// lease.ErrDraining for a room nobody holds.
func Example_atStart() {
	newRedis := func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), MaxRetries: 1, ContextTimeoutEnabled: true})
	}
	os.Exit(fxmodule.Run(
		fxmodule.Module, fxmodule.FromEnv, fxlease.Module,
		fx.Provide(newRedis),
		fx.Invoke(takeHomeRoom),
	))
}
