package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule/internal/listener"
	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// HTTP serves on addr the http.Handler that the constructor handler
// returns (provided to this server only), behind the in-flight Tracker,
// with /healthz/live and /healthz/ready beside it. It listens in an OnStart
// hook and adds the drain hooks name+".stop_intake" (503 with Retry-After
// from then on), name+".wait_in_flight", name+".close" and name+".serve",
// and the gating check name+"_listener". The listener stays open until
// phase close, so the probes answer through the drain (docs/fxmodule.md).
// name must be unique among the app's servers.
func HTTP(name, addr string, handler any) fx.Option {
	return fx.Module("drainkit.http."+name,
		fx.Provide(fx.Private, fx.Annotate(handler, fx.As(new(http.Handler)))),
		fx.Invoke(func(p httpParams) error { return serveHTTP(name, addr, p) }),
	)
}

type httpParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Manager   *lifecycle.Manager  `optional:"true"` // nil without Module: see needModule
	Registry  *readiness.Registry `optional:"true"`
	Names     *nameOwners         `optional:"true"`
	Handler   http.Handler
	Logger    *slog.Logger `optional:"true"`
}

func serveHTTP(name, addr string, p httpParams) error {
	option := fmt.Sprintf("fxmodule.HTTP(%q, %q, …)", name, addr)
	if p.Manager == nil {
		return needModule(option)
	}
	t := p.Manager.Tracker()
	mux := http.NewServeMux()
	p.Registry.Mount(mux)
	mux.Handle("/", t.Middleware(p.Handler))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	var bound listener.Bound
	start, serveHook := listenAndServe(p.Logger, name, addr, srv, &bound)
	if err := p.Names.addServer(p.Manager, name, option, append(httpHooks(name, srv, t), serveHook)...); err != nil {
		return err
	}
	if err := p.Registry.Add(bound.Check(name+"_listener", addr)); err != nil {
		return configerr.Wrap(err) // the app has a check of that name
	}
	p.Lifecycle.Append(start)
	return nil
}

// httpHooks drain srv's handler, wrapped by t.Middleware, while srv keeps
// serving the probes beside it until phase close. Every hook's Abort
// closes srv, so a drain cut short closes every connection.
func httpHooks(name string, srv *http.Server, t *drain.Tracker) []drain.Hook {
	abort := func() { _ = srv.Close() }
	stopIntake := func(context.Context) error {
		t.CloseIntake()
		srv.SetKeepAlivesEnabled(false) // closes idle connections too: clients reconnect to another instance
		return nil
	}
	wait := func(ctx context.Context) error {
		_ = stopIntake(ctx) // in case StopIntake was skipped
		return t.Wait(ctx)
	}
	return []drain.Hook{
		{Name: name + ".stop_intake", Phase: drain.StopIntake, Run: stopIntake, Abort: abort},
		{Name: name + ".wait_in_flight", Phase: drain.WaitInFlight, Run: wait, Abort: abort},
		{Name: name + ".close", Phase: drain.Close, Run: srv.Shutdown, Abort: abort},
	}
}

// listenAndServe returns the OnStart hook that listens on addr and serves
// srv in a goroutine, and the close-phase hook name+".serve" that waits
// for that goroutine; what shuts srv down is the caller's hook.
func listenAndServe(log *slog.Logger, name, addr string, srv *http.Server, bound *listener.Bound) (fx.Hook, drain.Hook) {
	if log == nil {
		log = slog.Default()
	}
	served := make(chan struct{}) // closed when Serve returns
	wait := func(ctx context.Context) error {
		if !bound.Listening() {
			return nil // never listened: nothing serves
		}
		select {
		case <-served:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	start := fx.Hook{OnStart: func(context.Context) error {
		ln, err := bound.Listen(addr)
		if err != nil {
			return fmt.Errorf("fxmodule: HTTP server %q: listen on %s: %w", name, addr, err)
		}
		go func() {
			defer close(served)
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				log.Error("serve", "server", name, "err", err)
			}
		}()
		log.Info("listening", "server", name, "addr", ln.Addr().String())
		return nil
	}}
	return start, drain.Hook{Name: name + ".serve", Phase: drain.Close, Run: wait}
}
