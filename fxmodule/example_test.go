package fxmodule_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"

	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/readiness"
)

// snapshotFlusher is a service's own drain work.
type snapshotFlusher struct{}

func (snapshotFlusher) Flush(context.Context) error { return nil }

func newSnapshotFlusher() *snapshotFlusher { return &snapshotFlusher{} }

// flushHook contributes the flusher's drain hook.
func flushHook(f *snapshotFlusher) drain.Hook {
	return drain.Hook{Name: "snapshots", Phase: drain.Flush, Run: f.Flush}
}

// newServer builds the HTTP server: the API tracked by the drain, the
// health endpoints beside it, outside the tracker, so that liveness
// answers 200 after intake stops and no probe counts as traffic.
func newServer(t *drain.Tracker, reg *readiness.Registry) *http.Server {
	api := http.NewServeMux()
	api.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello")) })
	mux := http.NewServeMux()
	reg.Mount(mux) // /healthz/live, /healthz/ready
	mux.Handle("/", t.Middleware(api))
	return &http.Server{Addr: ":8080", Handler: mux}
}

// serverHooks drains the server: intake after the delay, then in-flight requests.
func serverHooks(srv *http.Server, t *drain.Tracker) []drain.Hook {
	return drain.HTTPHooks("http", srv, t)
}

func listen(lc fx.Lifecycle, srv *http.Server) {
	lc.Append(fx.Hook{OnStart: func(context.Context) error {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			return err
		}
		go func() { _ = srv.Serve(ln) }() // ended by the drain's http hooks
		return nil
	}})
}

// A service on fx: the drain hooks and readiness checks are contributed
// through value groups, and fxmodule.Run drains before fx stops anything.
func Example() {
	os.Exit(fxmodule.Run(
		fxmodule.Module,
		fxmodule.FromEnv, // SERVICE_NAME, NODE_ID, DRAIN_TIMEOUT, DRAIN_DELAY, …
		fx.Provide(
			newSnapshotFlusher,
			newServer,
			fxmodule.AsHook(flushHook),
			fxmodule.AsHook(serverHooks),
			fxmodule.AsCheck(func() readiness.Check {
				return readiness.Check{Name: "database", Tier: readiness.Gating,
					Probe: func(ctx context.Context) error { return nil }}
			}),
		),
		fx.Invoke(listen),
	))
}

// A complete HTTP service with graceful shutdown. At SIGTERM readiness
// flips, the load balancer gets DRAIN_DELAY to notice, intake stops,
// requests in flight finish, and the process exits with a code that says
// how it went.
func ExampleHTTP() {
	hello := func() http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello\n") })
	}
	os.Exit(fxmodule.Run(
		fxmodule.Module, fxmodule.FromEnv, // SERVICE_NAME, DRAIN_TIMEOUT, DRAIN_DELAY, …
		fxmodule.HTTP("api", ":8080", hello),
	))
}
