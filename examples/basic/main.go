// Command basic is the smallest drainkit program: one HTTP server under a
// lifecycle.Manager, with a slow endpoint to watch a drain wait for it.
//
//	go run ./examples/basic
//	curl localhost:8080/slow &   # takes SLOW (default 3s)
//	curl localhost:8081/healthz/ready
//	# press Ctrl-C (or kill -TERM): readiness flips, the slow request
//	# finishes, the process exits 0 and logs the drain report.
//
// Environment: ADDR (default :8080), ADMIN_ADDR (health, default :8081), SLOW (default 3s), HANG_HOOK=1 adds a
// drain hook that ignores its context (to see the deadline at work), plus
// lifecycle's SERVICE_NAME, NODE_ID, DRAIN_TIMEOUT, DRAIN_DELAY, ….
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := lifecycle.ConfigFromEnv(nil)
	if err != nil {
		log.Error("bad configuration", "err", err)
		os.Exit(lifecycle.ExitConfig)
	}
	slow, err := time.ParseDuration(envOr("SLOW", "3s"))
	if err != nil {
		log.Error("bad configuration", "err", fmt.Errorf("SLOW=%q: %w", os.Getenv("SLOW"), err))
		os.Exit(lifecycle.ExitConfig)
	}
	cfg.Logger = log
	m, err := lifecycle.New(cfg)
	if err != nil {
		log.Error("bad configuration", "err", err)
		os.Exit(lifecycle.ExitConfig)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		log.Info("slow request started", "duration", slow)
		select {
		case <-time.After(slow):
			_, _ = io.WriteString(w, "slow request done\n")
		case <-r.Context().Done():
		}
	})
	health, err := readiness.New(readiness.Config{Service: envOr("SERVICE_NAME", "basic"), NodeID: cfg.NodeID,
		ReadyTimeout: cfg.ReadyTimeout, Logger: log}, m.State)
	if err != nil {
		log.Error("bad configuration", "err", err)
		os.Exit(lifecycle.ExitConfig)
	}
	m.OnTransition(health.OnTransition) // log the flip when it happens
	srv := &http.Server{Handler: m.Tracker().Middleware(mux)}
	if err := m.AddHook(drain.HTTPHooks("http", srv, m.Tracker())...); err != nil {
		panic(err) // a wiring bug, not a runtime condition
	}
	// Health is served on its own listener, outside the tracker: probes
	// must keep answering (ready 503, live 200) after intake stops, and a
	// kubelet's probes are not traffic the adaptive delay should wait out.
	adminMux := http.NewServeMux()
	health.Mount(adminMux)
	admin := &http.Server{Handler: adminMux}
	_ = m.AddHook(
		drain.Hook{Name: "admin.close", Phase: drain.Close, Run: admin.Shutdown},
		drain.Hook{Name: "readiness.close", Phase: drain.Close, Timeout: cfg.ReadyTimeout, Run: health.Close},
	)
	if os.Getenv("HANG_HOOK") == "1" {
		_ = m.AddHook(drain.Hook{Name: "stuck-flush", Phase: drain.Flush, Run: func(context.Context) error {
			select {} // ignores its context on purpose
		}})
	}

	m.OnStart(func(ctx context.Context) error {
		ln, err := net.Listen("tcp", envOr("ADDR", ":8080"))
		if err != nil {
			return err
		}
		aln, err := net.Listen("tcp", envOr("ADMIN_ADDR", ":8081"))
		if err != nil {
			ln.Close()
			return err
		}
		fmt.Printf("listening on %s\n", ln.Addr()) // tests read these lines
		fmt.Printf("admin on %s\n", aln.Addr())
		go func() { _ = srv.Serve(ln) }()    // ended by the http drain hooks
		go func() { _ = admin.Serve(aln) }() // ended by admin.close
		return nil
	})
	r := m.Run(context.Background())
	os.Exit(r.ExitCode)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
