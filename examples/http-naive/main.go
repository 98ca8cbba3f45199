// Command http-naive is the small HTTP API of examples/http shut down the
// way most services are: on SIGTERM, http.Server.Shutdown, then exit. It
// is the "before" of the drill (docs/drill.md): Shutdown closes the
// listener at once, while a Kubernetes Service still sends new
// connections to the pod until its endpoint removal has propagated, so
// those are refused.
//
//	go build -o /tmp/http-naive ./examples/http-naive
//	go run ./cmd/drainkit drill -lb kube -lag 2s -env 'ADDR=127.0.0.1:{port}' -- /tmp/http-naive
//
// Environment: ADDR (default :8080). GET /hello answers "hello";
// /healthz/live and /healthz/ready answer 200 while it serves.
package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = ":8080"
	}
	if err := run(ctx, addr, log, nil); err != nil {
		log.Error("exit", "err", err)
		os.Exit(1)
	}
}

// shutdownTimeout bounds Shutdown's wait for the requests in flight.
const shutdownTimeout = 10 * time.Second

// run serves on addr until ctx ends, then shuts down as most services do.
// It sends the bound address on listening, if not nil.
func run(ctx context.Context, addr string, log *slog.Logger, listening chan<- string) error {
	s := new(store)
	srv := &http.Server{Handler: newHandler(s), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("listening", "addr", ln.Addr().String())
	if listening != nil {
		listening <- ln.Addr().String()
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}

	// The textbook graceful shutdown: stop accepting, wait for the
	// requests in flight, flush, exit.
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	s.flush(log)
	return err
}

// store stands for a database client that buffers writes.
type store struct{ pending atomic.Int64 }

func (s *store) flush(log *slog.Logger) { log.Info("store flushed", "writes", s.pending.Swap(0)) }

func newHandler(s *store) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) {
		s.pending.Add(1)
		_, _ = w.Write([]byte("hello\n"))
	})
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }
	mux.HandleFunc("GET /healthz/live", ok)
	mux.HandleFunc("GET /healthz/ready", ok) // ready until the listener closes: what most services do
	return mux
}
