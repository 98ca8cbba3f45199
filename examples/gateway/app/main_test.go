package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testRooms is a real roompb.RoomsServer for tests: it counts the calls it
// receives and answers with the functions it is given.
type testRooms struct {
	roompb.UnimplementedRoomsServer
	applies, gets atomic.Int64
	apply         func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error)
	get           func(ctx context.Context, req *roompb.GetRoomRequest) (*roompb.Room, error)
}

func (s *testRooms) Apply(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	s.applies.Add(1)
	return s.apply(ctx, req)
}

func (s *testRooms) GetRoom(ctx context.Context, req *roompb.GetRoomRequest) (*roompb.Room, error) {
	s.gets.Add(1)
	return s.get(ctx, req)
}

func (s *testRooms) calls() int64 { return s.applies.Load() + s.gets.Load() }

// backend is an in-process room-service stand-in: a gRPC server on
// loopback serving testRooms and grpc.health.v1 ("room-service" SERVING).
type backend struct {
	addr   string
	rooms  *testRooms
	health *health.Server
}

func startBackend(t testing.TB, rooms *testRooms) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return serveBackend(t, ln, rooms)
}

// serveBackend is startBackend on ln.
func serveBackend(t testing.TB, ln net.Listener, rooms *testRooms) *backend {
	t.Helper()
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus(HealthService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	roompb.RegisterRoomsServer(srv, rooms)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return &backend{addr: ln.Addr().String(), rooms: rooms, health: hs}
}

// setServing flips the backend's health for room-service.
func (b *backend) setServing(serving bool) {
	s := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		s = healthpb.HealthCheckResponse_SERVING
	}
	b.health.SetServingStatus(HealthService, s)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
