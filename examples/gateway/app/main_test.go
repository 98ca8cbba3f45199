package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
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

	received atomic.Int64 // Apply calls that reached the server, frozen or not

	mu   sync.Mutex
	thaw chan struct{} // closed unless frozen
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
	b := &backend{rooms: rooms, thaw: make(chan struct{})}
	close(b.thaw)
	srv := grpc.NewServer(grpc.UnaryInterceptor(b.frozen))
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
	b.addr, b.health = ln.Addr().String(), hs
	return b
}

// freeze makes the backend answer no unary call (commands, health checks)
// until the returned function is called: a stopped process whose port
// still accepts. Calls held meanwhile then go on.
func (b *backend) freeze() (thaw func()) {
	c := make(chan struct{})
	b.mu.Lock()
	b.thaw = c
	b.mu.Unlock()
	return sync.OnceFunc(func() { close(c) })
}

func (b *backend) frozen(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod == roompb.Rooms_Apply_FullMethodName {
		b.received.Add(1)
	}
	b.mu.Lock()
	thaw := b.thaw
	b.mu.Unlock()
	select {
	case <-thaw:
	case <-ctx.Done(): // the test's server stops; a frozen process would not see this
		return nil, ctx.Err()
	}
	return handler(ctx, req)
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
