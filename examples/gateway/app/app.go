package app

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// Main runs the gateway as its command does, with its environment read
// through getenv: it reads the configuration, refusing a bad one with
// lifecycle.ExitConfig, and runs the app until it has drained; it returns
// the process's exit code.
func Main(getenv func(string) string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	slog.SetDefault(log)
	// Both configurations are read before fx.New: fx.StopTimeout must be
	// given to fx.New, and it depends on DRAIN_TIMEOUT.
	lcfg, err := lifecycle.ConfigFromEnv(lifecycleEnv(getenv))
	if err != nil {
		log.Error("refusing to start: bad configuration", "err", err.Error())
		return lifecycle.ExitConfig
	}
	cfg, err := configFromEnv(getenv, lcfg)
	if err != nil {
		log.Error("refusing to start: bad configuration", "err", err.Error())
		return lifecycle.ExitConfig
	}
	notice := func(addr string) {
		fmt.Fprintf(stdout, "listening on %s\n", addr) // the e2e harness reads this line
		log.Info("listening", "addr", addr, "room_backends", cfg.Backends, "room_target", cfg.DNSTarget)
	}
	return fxmodule.Run(options(lcfg, cfg, log, notice)...)
}

// options is the whole app, for run and for in-process tests.
func options(lcfg lifecycle.Config, cfg Config, log *slog.Logger, notice func(addr string)) []fx.Option {
	return []fx.Option{
		fx.StopTimeout(5 * time.Second), // for the OnStop hooks, after the drain: DRAIN_TIMEOUT + 5 s fits the grace period
		fxmodule.Module,
		fx.Supply(lcfg, cfg, log, notice),
		fx.Provide(
			prometheus.NewRegistry,
			func(r *prometheus.Registry) prometheus.Registerer { return r },
			newBackendsOnStart,
			newPending,
			newAPI,
			newServer,
			newEvents,
			fxmodule.AsHook(func(s *server, t *drain.Tracker) []drain.Hook { return s.hooks(t) }),
			fxmodule.AsHook((*events).hooks),
			fxmodule.AsHook(func(b *backends) drain.Hook {
				return drain.Hook{Name: "rooms.close", Phase: drain.Close, Run: b.Close}
			}),
			fxmodule.AsCheck(func(s *server) readiness.Check { return s.listenerCheck() }),
			fxmodule.AsCheck(func(b *backends) readiness.Check { return b.roomCheck() }),
		),
		fx.Invoke(func(lc fx.Lifecycle, s *server) { lc.Append(fx.Hook{OnStart: s.Start}) }),
	}
}

// newBackendsOnStart connects to the backends when the app starts (before
// the server, which depends on them); the drain's Close phase closes them.
func newBackendsOnStart(lc fx.Lifecycle, cfg Config, log *slog.Logger) *backends {
	b := newBackends(cfg, log)
	lc.Append(fx.Hook{OnStart: b.Start})
	return b
}
