package fxmodule

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/fxmodule/internal/listener"
	"github.com/drainkit/drainkit/fxmodule/internal/names"
	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/internal/serve"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// Admin serves a service's operational endpoints on addr: /healthz/live
// and /healthz/ready, and /metrics when the graph's prometheus.Registerer
// is a prometheus.Gatherer (a *prometheus.Registry). It is not an intake:
// it answers through the whole drain and closes in phase close (hook
// "admin.serve"). It listens in an OnStart hook; a
// service has at most one, the server named "admin".
func Admin(addr string) fx.Option {
	if err := listener.CheckAddr(addr); err != nil {
		return fx.Error(configerr.Errorf("fxmodule: Admin(%q): %w", addr, err))
	}
	return fx.Module("drainkit.admin", fx.Invoke(func(p adminParams) error { return serveAdmin(addr, p) }))
}

type adminParams struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Manager    *lifecycle.Manager    `optional:"true"` // nil without Module: see names.NeedModule
	Registry   *readiness.Registry   `optional:"true"`
	Names      *names.Owners         `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
	Logger     *slog.Logger          `optional:"true"`
}

func serveAdmin(addr string, p adminParams) error {
	option := fmt.Sprintf("fxmodule.Admin(%q)", addr)
	if p.Manager == nil {
		return names.NeedModule(option)
	}
	mux := http.NewServeMux()
	p.Registry.Mount(mux)
	paths := []string{readiness.LivePath, readiness.ReadyPath}
	log := serviceLogger(p.Logger, p.Manager)
	if g, ok := p.Registerer.(prometheus.Gatherer); ok {
		mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
		paths = append(paths, "/metrics")
	} else { // said once at start, not found by a scraper's first 404
		log.Info("fxmodule: Admin serves no /metrics: the graph has no prometheus.Registerer that is also a Gatherer (a *prometheus.Registry)",
			"registerer", fmt.Sprintf("%T", p.Registerer))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s := serve.NewHTTP("admin", srv, log)
	if err := p.Names.AddServer(p.Manager, "admin", option, s.Hook()); err != nil {
		return err
	}
	p.Lifecycle.Append(listenHook(log, "admin", addr, new(listener.Bound), s, paths...))
	return nil
}
