// Command grpc-naive is the gRPC service of examples/grpc shut down the
// way most gRPC services are: on SIGTERM, grpc.Server.GracefulStop, then
// exit. It is the "before" of the gRPC drill (docs/drill.md). GracefulStop
// closes the listener and sends GOAWAY at once, while a Kubernetes Service
// still places new connections on the pod until its endpoint removal has
// propagated: clients that reconnect there are refused.
//
//	go build -o /tmp/grpc-naive ./examples/grpc-naive
//	go run ./cmd/drainkit drill -grpc -lb kube -lag 2s -env 'GRPC_ADDR=127.0.0.1:{port}' \
//	  -call /grpc.testing.TestService/UnaryCall -- /tmp/grpc-naive
//
// Environment: GRPC_ADDR (default :13001). grpc.testing.TestService's
// UnaryCall echoes its payload; grpc.health.v1 answers SERVING while it
// serves.
package main

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cmp.Or(os.Getenv("GRPC_ADDR"), ":13001"), log, nil); err != nil {
		log.Error("exit", "err", err)
		os.Exit(1)
	}
}

// run serves on addr until ctx ends, then stops as most gRPC services do.
// It sends the bound address on listening, if not nil.
func run(ctx context.Context, addr string, log *slog.Logger, listening chan<- string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, echo{})
	healthpb.RegisterHealthServer(srv, health.NewServer()) // SERVING for "" from the start
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String())
	if listening != nil {
		listening <- ln.Addr().String()
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("stopping: GracefulStop")
	srv.GracefulStop() // GOAWAY, the listener closed, then waits for the calls in flight
	return <-served
}

type echo struct {
	testgrpc.UnimplementedTestServiceServer
}

func (echo) UnaryCall(_ context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Payload: req.GetPayload()}, nil
}
