package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// An HTTP service without fx. Readiness answers 503 from the flip; the
// probes have a server of their own, which intake's close leaves open, so
// liveness answers 200 through the drain; requests in flight finish; Run
// returns the exit code. Serve binds each port in a start step: one that
// is taken fails the start before Running (exit 5).
func ExampleManager_Run() {
	cfg, err := lifecycle.ConfigFromEnv(nil) // SERVICE_NAME, DRAIN_TIMEOUT, DRAIN_DELAY, …
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(lifecycle.ExitConfig)
	}
	m, _ := lifecycle.New(cfg) // cannot fail: ConfigFromEnv has validated cfg
	reg, err := readiness.New(readiness.Config{Service: cfg.Service, NodeID: cfg.NodeID, ReadyTimeout: cfg.ReadyTimeout}, m.State)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(lifecycle.ExitConfig)
	}
	m.OnTransition(reg.OnTransition) // the ready log and gauge flip with the state
	probes := http.NewServeMux()
	reg.Mount(probes) // /healthz/live, /healthz/ready
	api := &http.Server{Addr: ":8080", Handler: m.Tracker().Middleware(http.DefaultServeMux)}
	if err := errors.Join(
		m.AddHook(drain.HTTPHooks("api", api, m.Tracker())...), // intake: stops after the delay
		m.AddHook(drain.Hook{Name: "readiness.close", Phase: drain.Close, Run: reg.Close}),
		m.Serve("api", api),
		m.Serve("admin", &http.Server{Addr: ":8081", Handler: probes}),
	); err != nil {
		panic(err) // a wiring mistake, such as two hooks of one name
	}
	os.Exit(m.Run(context.Background()).ExitCode)
}

// Listeners run at every transition, the flip included, before the
// propagation delay and the hooks.
func ExampleManager_OnTransition() {
	m, _ := lifecycle.New(lifecycle.Config{Service: "room-service",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, stop := context.WithCancel(context.Background())
	m.OnTransition(func(t lifecycle.Transition) {
		fmt.Println(t.From, "→", t.To)
		if t.To == lifecycle.Running {
			stop() // stop as soon as running (a stop during start-up would abort the start)
		}
	})
	_ = m.AddHook(drain.Hook{Name: "flush", Phase: drain.Flush, Run: func(context.Context) error {
		fmt.Println("flushing")
		return nil
	}})
	r := m.Run(ctx)
	fmt.Println("exit code", r.ExitCode)
	// Output:
	// starting → running
	// running → draining
	// flushing
	// draining → stopped
	// exit code 0
}
