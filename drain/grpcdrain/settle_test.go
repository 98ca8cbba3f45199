package grpcdrain_test

import (
	"context"
	"net"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/test/bufconn"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/grpcdrain"
)

// serveInBubble serves srv on an in-memory listener and returns a client
// connected to it, both inside the calling synctest bubble, so that the
// test's clock stands still while a call is on its way.
func serveInBubble(t *testing.T, srv *grpc.Server) (*grpc.ClientConn, <-chan error) {
	t.Helper()
	ln := bufconn.Listen(1 << 16)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	t.Cleanup(srv.Stop)
	return conn, served
}

// echo is grpc-go's own test service, answering UnaryCall.
type echo struct {
	testgrpc.UnimplementedTestServiceServer
}

func (echo) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{}, nil
}

// Clients send calls until they read the server's GOAWAY, so the calls
// they sent in the last round trip before reach the server after
// stop_intake has begun. Those are served, never refused: a client that
// does not retry would lose them (the drill found it behind a Service,
// where connections stay on a pod until its GOAWAY). One such call is
// held at the server's door, ahead of the drain's interceptor, until
// stop_intake has done all it does before time passes. With a second,
// idle server on the same Tracker (fxgrpc gives every server the
// manager's), whose GracefulStop returns at once, the call is served too.
func TestStopIntakeServesTheCallsThatRaceItsGoaway(t *testing.T) {
	for _, tt := range []struct {
		name       string
		idleBeside bool
	}{
		{"one server", false},
		{"an idle server on the same tracker", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { raceTheGoaway(t, tt.idleBeside) })
		})
	}
}

func raceTheGoaway(t *testing.T, idleBeside bool) {
	tr := new(drain.Tracker)
	atDoor, letIn := make(chan struct{}), make(chan struct{})
	holdAtDoor := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		close(atDoor)
		<-letIn
		return h(ctx, req)
	})
	srv := grpc.NewServer(append([]grpc.ServerOption{holdAtDoor}, grpcdrain.ServerOptions(tr)...)...) // outermost first
	testgrpc.RegisterTestServiceServer(srv, echo{})
	conn, served := serveInBubble(t, srv)
	hooks := grpcdrain.Hooks("grpc", srv, tr)
	if idleBeside {
		idle := grpc.NewServer(grpcdrain.ServerOptions(tr)...)
		testgrpc.RegisterTestServiceServer(idle, echo{})
		serveInBubble(t, idle) // its client never calls, so never connects
		hooks = append(hooks, grpcdrain.Hooks("idle", idle, tr)...)
	}
	answered := make(chan error, 1)
	go func() {
		_, err := testgrpc.NewTestServiceClient(conn).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		answered <- err
	}()
	<-atDoor // sent before any GOAWAY

	report := make(chan *drain.Report, 1)
	go func() { report <- drain.Run(context.Background(), "test", hooks) }()
	synctest.Wait() // GOAWAY sent and read; stop_intake waits for the clock
	close(letIn)

	require.NoError(t, <-answered, "the call that raced the GOAWAY")
	require.NoError(t, (<-report).Err())
	require.NoError(t, <-served)
	_, refused, _ := tr.Arrivals()
	require.Zero(t, refused, "calls the tracker refused")
}
