package fxmodule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"time"

	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule/internal/listener"
	"github.com/drainkit/drainkit/fxmodule/internal/names"
	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/internal/serve"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// HTTP serves on addr the http.Handler that the constructor handler
// returns (provided to this server only; like any fx constructor it may
// take the graph's values, e.g. func(*lease.Manager) http.Handler),
// behind the in-flight Tracker, with /healthz/live and /healthz/ready
// beside it. It listens in an OnStart hook and adds drain.HTTPHooks'
// hooks (name+".stop_intake": 503 with Retry-After from then on;
// ".wait_in_flight"; ".close"), name+".serve", and the gating check
// name+"_listener". The listener stays open until phase close, so the
// probes answer through the drain (docs/fxmodule.md). name must be set and
// unique among the app's servers, addr a host:port ("127.0.0.1:0" picks a
// port), and handler a constructor, not the handler itself; each mistake
// is refused before anything starts (exit 78).
func HTTP(name, addr string, handler any) fx.Option {
	if err := names.EmptyServerName(fmt.Sprintf("HTTP(%q, %q, …)", name, addr), name); err != nil {
		return fx.Error(err)
	}
	if err := checkHandler(handler); err != nil {
		return fx.Error(configerr.Errorf("fxmodule: HTTP(%q, %q, handler): %w", name, addr, err))
	}
	if err := listener.CheckAddr(addr); err != nil {
		return fx.Error(configerr.Errorf("fxmodule: HTTP(%q, %q, …): %w", name, addr, err))
	}
	return fx.Module("drainkit.http."+name,
		fx.Provide(fx.Private, fx.Annotate(handler, fx.As(new(http.Handler)))),
		fx.Invoke(func(p httpParams) error { return serveHTTP(name, addr, p) }),
	)
}

// checkHandler refuses what fx would crash on (nil) or refuse in words
// that do not name the option: a handler given for its constructor (a
// *http.ServeMux), or a func that returns no http.Handler, such as an
// http.HandlerFunc. Anything else that is not a func (fx.Annotate's
// result) is fx's to check.
func checkHandler(handler any) error {
	if handler == nil {
		return errors.New("handler is nil; want a constructor that returns an http.Handler, e.g. func() http.Handler")
	}
	t := reflect.TypeOf(handler)
	if _, ok := handler.(http.Handler); ok && t.Kind() != reflect.Func {
		return fmt.Errorf("handler is a %s, a handler; want a constructor that returns it, e.g. func() http.Handler { return h }", t)
	}
	if t.Kind() != reflect.Func {
		return nil
	}
	for i := range t.NumOut() {
		if t.Out(i).Implements(reflect.TypeFor[http.Handler]()) {
			return nil
		}
	}
	return fmt.Errorf("handler is a %s, which returns no http.Handler; want a constructor that returns one, e.g. func() http.Handler { return h }", t)
}

type httpParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Manager   *lifecycle.Manager  `optional:"true"` // nil without Module: see names.NeedModule
	Registry  *readiness.Registry `optional:"true"`
	Names     *names.Owners       `optional:"true"`
	Handler   http.Handler
	Logger    *slog.Logger `optional:"true"`
}

func serveHTTP(name, addr string, p httpParams) error {
	option := fmt.Sprintf("fxmodule.HTTP(%q, %q, …)", name, addr)
	if p.Manager == nil {
		return names.NeedModule(option)
	}
	if p.Handler == nil {
		return configerr.Errorf("%s: the handler is nil", option)
	}
	t := p.Manager.Tracker()
	mux := http.NewServeMux()
	p.Registry.Mount(mux)
	mux.Handle("/", t.Middleware(p.Handler))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	var bound listener.Bound
	log := serviceLogger(p.Logger, p.Manager)
	s := serve.NewHTTP(name, srv, log)
	if err := p.Names.AddServer(p.Manager, name, option, append(drain.HTTPHooks(name, srv, t), s.Hook())...); err != nil {
		return err
	}
	if err := p.Registry.Add(bound.Check(name+"_listener", addr)); err != nil {
		return err // the app has a check of that name: matches lifecycle.ErrConfig
	}
	p.Lifecycle.Append(listenHook(log, name, addr, &bound, s, readiness.LivePath, readiness.ReadyPath, "/"))
	return nil
}

// listenHook is the OnStart hook that listens on addr and serves s, and
// says which paths it serves.
func listenHook(log *slog.Logger, name, addr string, bound *listener.Bound, s *serve.HTTP, paths ...string) fx.Hook {
	return fx.Hook{OnStart: func(context.Context) error {
		ln, err := bound.Listen(addr)
		if err != nil {
			return fmt.Errorf("fxmodule: HTTP server %q: listen on %s: %w", name, addr, err)
		}
		s.Serve(ln)
		log.Info("listening", "server", name, "addr", ln.Addr().String(), "paths", strings.Join(paths, ","))
		return nil
	}}
}
