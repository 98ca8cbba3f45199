package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/readiness"
)

// registerRooms puts the Rooms API on the gRPC server that fxgrpc.Server
// wires (in-flight tracking, grpc.health.v1, listener, drain hooks).
func registerRooms(s *grpc.Server, r *rooms) {
	roompb.RegisterRoomsServer(s, r.svc)
	registerEvents(s, r)
}

// adminServer serves /healthz/live, /healthz/ready and /metrics on
// ADMIN_ADDR. It keeps answering through the drain (ready says 503) and
// closes last, in the Close phase.
type adminServer struct {
	addr string
	srv  *http.Server
	log  *slog.Logger
	wg   sync.WaitGroup
}

func newAdmin(c config, reg *readiness.Registry, pr *prometheus.Registry, log *slog.Logger) *adminServer {
	mux := http.NewServeMux()
	reg.Mount(mux)
	mux.Handle("/metrics", promhttp.HandlerFor(pr, promhttp.HandlerOpts{}))
	return &adminServer{addr: c.AdminAddr, srv: &http.Server{Handler: mux}, log: log}
}

func (a *adminServer) listen() error {
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		return fmt.Errorf("ADMIN_ADDR=%q: %w", a.addr, err)
	}
	a.wg.Go(func() {
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("admin serve", "err", err)
		}
	})
	a.log.Info("listening", "admin", ln.Addr().String())
	return nil
}

func adminHook(a *adminServer) drain.Hook {
	return drain.Hook{Name: "admin.close", Phase: drain.Close, Run: func(ctx context.Context) error {
		err := a.srv.Shutdown(ctx)
		return errors.Join(err, waitGroup(ctx, &a.wg))
	}}
}

// waitGroup waits for wg or ctx.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
