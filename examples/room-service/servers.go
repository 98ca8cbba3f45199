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
	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/grpchealth"
)

// grpcServer serves the Rooms API and grpc.health.v1 on GRPC_ADDR.
type grpcServer struct {
	addr   string
	srv    *grpc.Server
	health *grpchealth.Server
	log    *slog.Logger

	wg     sync.WaitGroup // Serve and the health server's loop
	cancel context.CancelFunc
}

func newGRPC(c config, r *rooms, m *lifecycle.Manager, reg *readiness.Registry, log *slog.Logger) *grpcServer {
	t := m.Tracker()
	srv := grpc.NewServer(grpcdrain.ServerOptions(t)...) // an RPC counts until its answer is written
	roompb.RegisterRoomsServer(srv, r.svc)
	health := grpchealth.NewServer(reg)
	health.Register(srv)
	m.OnDrain(health.Drain) // NOT_SERVING at the flip, latched
	return &grpcServer{addr: c.GRPCAddr, srv: srv, health: health, log: log}
}

func (g *grpcServer) listen() error {
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		return fmt.Errorf("GRPC_ADDR=%q: %w", g.addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	g.wg.Go(func() { _ = g.health.Run(ctx) })
	g.wg.Go(func() {
		if err := g.srv.Serve(ln); err != nil {
			g.log.Error("grpc serve", "err", err)
		}
	})
	g.log.Info("listening", "grpc", ln.Addr().String())
	return nil
}

// grpcHooks drain the gRPC server: Watch streams are ended at StopIntake
// (so GracefulStop does not wait for them), in-flight RPCs finish in
// WaitInFlight, and the health server's loop and Serve are waited for in Close.
func grpcHooks(g *grpcServer, m *lifecycle.Manager) []drain.Hook {
	hooks := grpcdrain.Hooks("grpc", g.srv, m.Tracker())
	return append(hooks,
		drain.Hook{Name: "grpc.health_watch", Phase: drain.StopIntake, Run: func(context.Context) error {
			g.health.Close()
			return nil
		}},
		drain.Hook{Name: "grpc.goroutines", Phase: drain.Close, Run: func(ctx context.Context) error {
			if g.cancel != nil {
				g.cancel()
			}
			return waitGroup(ctx, &g.wg)
		}},
	)
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
