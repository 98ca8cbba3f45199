// Command grpc is the template to copy for a gRPC service on drainkit: a
// unary RPC, one drain hook, probes on an admin port; go run ./examples/grpc
// (GRPC_ADDR :13001, ADMIN_ADDR :13002), Ctrl-C drains it.
package main

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxgrpc"
)

func main() {
	os.Exit(fxmodule.Run(fxmodule.FromEnv,
		service(cmp.Or(os.Getenv("GRPC_ADDR"), ":13001"), cmp.Or(os.Getenv("ADMIN_ADDR"), ":13002"))))
}

// service is the app but its configuration: the test runs what main runs.
// gRPC health answers NOT_SERVING from the flip on, so it is the readiness
// probe and cannot be the liveness one: fxmodule.Admin serves
// /healthz/live (and /healthz/ready, /metrics) on a port of its own.
func service(grpcAddr, adminAddr string) fx.Option {
	return fx.Options(
		fxmodule.Module,
		fxmodule.Admin(adminAddr),                // /healthz/live apart: gRPC health is NOT_SERVING from the flip
		fxgrpc.Server("api", grpcAddr, register), // register(s *grpc.Server, …) calls your pb.RegisterXServer
		fx.Provide(func() prometheus.Registerer { return prometheus.NewRegistry() }), // Admin serves it as /metrics
		fx.Supply(new(store)),
		fx.Provide(fxmodule.AsHook(flushHook)),
	)
}

// register registers the service's implementation. It is grpc-go's own
// test service, so the template needs no code generation: yours calls its
// generated pb.RegisterXServer.
func register(s *grpc.Server, st *store) {
	testgrpc.RegisterTestServiceServer(s, &echo{store: st})
}

type echo struct {
	testgrpc.UnimplementedTestServiceServer
	store *store
}

func (e *echo) UnaryCall(_ context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	e.store.pending.Add(1)
	return &testgrpc.SimpleResponse{Payload: req.GetPayload()}, nil
}

// store stands for a database client that buffers writes.
type store struct{ pending atomic.Int64 }

func (s *store) Flush(ctx context.Context) error {
	slog.InfoContext(ctx, "store flushed", "writes", s.pending.Swap(0))
	return nil
}

// flushHook writes the buffer out once the RPCs in flight have finished.
func flushHook(s *store) drain.Hook {
	return drain.Hook{Name: "store.flush", Phase: drain.Flush, Run: s.Flush}
}
