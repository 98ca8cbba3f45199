package grpcdrain_test

import (
	"context"
	"net"
	"testing"
	"testing/synctest"
	"time"

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
// stop_intake has done all it does before time passes.
func TestStopIntakeServesTheCallsThatRaceItsGoaway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
		answered := make(chan error, 1)
		go func() {
			_, err := testgrpc.NewTestServiceClient(conn).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			answered <- err
		}()
		<-atDoor // sent before any GOAWAY

		hooks := grpcdrain.Hooks("grpc", srv, tr)
		report := make(chan *drain.Report, 1)
		go func() { report <- drain.Run(context.Background(), "test", hooks) }()
		synctest.Wait() // GOAWAY sent and read; stop_intake waits for the clock
		close(letIn)

		require.NoError(t, <-answered, "the call that raced the GOAWAY")
		require.NoError(t, (<-report).Err())
		require.NoError(t, <-served)
		_, refused, _ := tr.Arrivals()
		require.Zero(t, refused, "calls the tracker refused")
	})
}

// stop_intake serves late calls only while a connection is open to bring
// them: with none, or once the last has closed, it closes intake at once
// rather than hold every drain for the settle.
func TestStopIntakeSettlesOnlyWhileAConnectionIsOpen(t *testing.T) {
	tests := []struct {
		name string
		give func(t *testing.T, conn *grpc.ClientConn, b *blocker)
		want time.Duration
	}{
		{"no connection", func(*testing.T, *grpc.ClientConn, *blocker) {}, 0},
		{"an idle connection", func(t *testing.T, conn *grpc.ClientConn, b *blocker) {
			close(b.release)
			require.NoError(t, <-callAsync(conn)) // connected, then idle
		}, 0},
		{"a call in flight", func(t *testing.T, conn *grpc.ClientConn, b *blocker) {
			callAsync(conn)
			<-b.entered
			t.Cleanup(func() { close(b.release) })
		}, grpcdrain.GoawaySettle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := new(drain.Tracker)
				srv := grpc.NewServer(grpcdrain.ServerOptions(tr)...)
				b := &blocker{entered: make(chan struct{}, 1), release: make(chan struct{})}
				srv.RegisterService(&blockerDesc, b)
				conn, _ := serveInBubble(t, srv)
				tt.give(t, conn, b)

				start := time.Now()
				require.NoError(t, hooksByPhase(grpcdrain.Hooks("grpc", srv, tr))[drain.StopIntake].Run(context.Background()))
				if got := time.Since(start); got != tt.want {
					t.Errorf("stop_intake took %v; want %v", got, tt.want)
				}
			})
		})
	}
}
