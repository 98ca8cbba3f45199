package lifecycle_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/lifecycle"
)

// A service without fx: the manager handles signals, drains the HTTP
// server and returns the exit code.
func ExampleManager_Run() {
	cfg, err := lifecycle.ConfigFromEnv(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(lifecycle.ExitConfig)
	}
	m, err := lifecycle.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(lifecycle.ExitConfig)
	}
	srv := &http.Server{Addr: ":8080", Handler: m.Tracker().Middleware(http.DefaultServeMux)}
	if err := m.AddHook(drain.HTTPHooks("http", srv, m.Tracker())...); err != nil {
		panic(err)
	}
	m.OnStart(func(context.Context) error {
		go func() { _ = srv.ListenAndServe() }()
		return nil
	})
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
