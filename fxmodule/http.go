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
	"github.com/drainkit/drainkit/internal/listener"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// HTTP serves, on addr, the http.Handler that the constructor handler
// returns (any fx constructor whose result implements http.Handler), as a
// server the drain knows, so a service writes none of the wiring:
//
//   - requests go through the in-flight Tracker, and the health endpoints
//     (/healthz/live, /healthz/ready) are mounted beside them, outside it;
//   - it listens in an OnStart hook (an address that cannot be bound fails
//     the start, naming it) and serves in a goroutine the drain waits for;
//   - its drain hooks are name+".stop_intake" (intake closed: the handler's
//     requests get 503, Retry-After and Connection: close; keep-alives off,
//     idle connections closed), name+".wait_in_flight" (the requests in
//     flight finish), and in phase close name+".close" (the listener shut
//     down) and name+".serve" (Serve has returned);
//   - a gating readiness check, name+"_listener", dials the bound address.
//
// The listener stays open until phase close, so the probes answer through
// the whole drain: the kubelet probes this port, and a refused liveness
// probe could restart a pod that is draining well. The load balancer has
// been told at the flip (ready says 503) and given DRAIN_DELAY; a request
// that still comes after stop_intake gets a 503 it may retry elsewhere.
// A service behind a balancer that retries only refused connections serves
// its API with drain.HTTPHooks on a server of its own and its probes on
// [Admin].
//
// name identifies the server in hook and check names and logs; two
// servers with one name are refused. The handler is private to this
// server.
func HTTP(name, addr string, handler any) fx.Option {
	return fx.Module("drainkit.http."+name,
		fx.Provide(fx.Private, fx.Annotate(handler, fx.As(new(http.Handler)))),
		fx.Invoke(func(p httpParams) error { return serveHTTP(name, addr, p) }),
	)
}

type httpParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Manager   *lifecycle.Manager
	Registry  *readiness.Registry
	Names     *takenNames
	Handler   http.Handler
	Logger    *slog.Logger `optional:"true"`
}

func serveHTTP(name, addr string, p httpParams) error {
	t := p.Manager.Tracker()
	mux := http.NewServeMux()
	p.Registry.Mount(mux)
	mux.Handle("/", t.Middleware(p.Handler))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	var bound listener.Bound
	start, served := listenAndServe(p.Logger, name, addr, srv, &bound)
	option := fmt.Sprintf("fxmodule.HTTP(%q, %q, …)", name, addr)
	if err := p.Names.addServer(p.Manager, name, option, append(httpHooks(name, srv, t), served)...); err != nil {
		return err
	}
	if err := p.Registry.Add(bound.Check(name+"_listener", addr)); err != nil {
		return &configError{err} // the app has a check of that name
	}
	p.Lifecycle.Append(start)
	return nil
}

// httpHooks drain srv, whose handler t.Middleware wraps, while srv keeps
// serving the probes mounted beside it until phase close. Every hook's
// Abort closes srv, so a drain cut short closes every connection.
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
