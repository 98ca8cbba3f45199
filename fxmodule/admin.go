package fxmodule

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/internal/listener"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// Admin serves a service's operational endpoints on addr, for services
// whose traffic is not HTTP (a gRPC service's probes and scrapes):
//
//   - /healthz/live and /healthz/ready, from the *readiness.Registry;
//   - /metrics, when the graph's prometheus.Registerer is also a
//     prometheus.Gatherer (a *prometheus.Registry), so that the scrape shows
//     what drainkit registered there; without one there is no /metrics.
//
// Unlike [HTTP], it is not an intake: it keeps answering through the whole
// drain (the ready probe says 503 from the flip on, which is how the load
// balancer learns of it) and closes last, in phase close (hook
// "admin.close", then "admin.serve" waits for it). It listens in an
// OnStart hook; an address that cannot be bound fails the start, naming it.
// A service has at most one.
func Admin(addr string) fx.Option {
	return fx.Module("drainkit.admin", fx.Invoke(func(p adminParams) error { return serveAdmin(addr, p) }))
}

type adminParams struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Manager    *lifecycle.Manager
	Registry   *readiness.Registry
	Registerer prometheus.Registerer `optional:"true"`
	Logger     *slog.Logger          `optional:"true"`
}

func serveAdmin(addr string, p adminParams) error {
	mux := http.NewServeMux()
	p.Registry.Mount(mux)
	if g, ok := p.Registerer.(prometheus.Gatherer); ok {
		mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	closeHook := drain.Hook{Name: "admin.close", Phase: drain.Close, Run: func(ctx context.Context) error {
		return srv.Shutdown(ctx)
	}}
	if err := p.Manager.AddHook(closeHook); err != nil {
		return err
	}
	return serve(p.Lifecycle, p.Manager, p.Logger, "admin", addr, srv, new(listener.Bound))
}
