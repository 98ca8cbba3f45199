// Command http is the template to copy for an HTTP service on drainkit: one
// hook, one check; go run ./examples/http (ADDR :8080), Ctrl-C drains it.
package main

import (
	"cmp"
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
	os.Exit(fxmodule.Run(fxmodule.FromEnv, service(cmp.Or(os.Getenv("ADDR"), ":8080"))))
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

func (*store) Ping(context.Context) error { return nil }
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
