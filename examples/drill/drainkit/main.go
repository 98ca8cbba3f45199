// Command drainkit is examples/http, the small HTTP API on drainkit, with
// its address read from ADDR so that the drill can run several of it: the
// "after" of the drill (docs/drill.md), beside examples/http-naive.
//
//	go build -o /tmp/http-drainkit ./examples/drill/drainkit
//	go run ./cmd/drainkit drill -lb kube -lag 2s -env 'ADDR=127.0.0.1:{port}' -- /tmp/http-drainkit
//
// Environment: ADDR (default :8080), and lifecycle's SERVICE_NAME,
// DRAIN_DELAY (default 5s: it keeps serving that long after SIGTERM,
// while endpoint removal propagates), DRAIN_TIMEOUT, ….
package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"

	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/readiness"
)

func main() {
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = ":8080"
	}
	os.Exit(fxmodule.Run(fxmodule.FromEnv, service(addr)))
}

// service is the app but its configuration: the test runs what main runs.
func service(addr string) fx.Option {
	return fx.Options(
		fxmodule.Module,
		fxmodule.HTTP("api", addr, newHandler),
		fx.Supply(new(store)),
		fx.Provide(fxmodule.AsHook(flushHook), fxmodule.AsCheck(storeCheck)),
	)
}

// store stands for a database client that buffers writes.
type store struct{ pending atomic.Int64 }

// Ping stands for a round trip to the database.
func (*store) Ping(context.Context) error { return nil }

// Flush writes the buffered writes out.
func (s *store) Flush(ctx context.Context) error {
	slog.InfoContext(ctx, "store flushed", "writes", s.pending.Swap(0))
	return nil
}

func newHandler(s *store) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) {
		s.pending.Add(1)
		_, _ = w.Write([]byte("hello\n"))
	})
	return mux
}

// flushHook writes the buffer out once the requests in flight have finished.
func flushHook(s *store) drain.Hook {
	return drain.Hook{Name: "store.flush", Phase: drain.Flush, Run: s.Flush}
}

// storeCheck gates readiness on the database; liveness never checks it.
func storeCheck(s *store) readiness.Check {
	return readiness.Check{Name: "store", Tier: readiness.Gating, Probe: s.Ping}
}
