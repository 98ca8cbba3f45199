package drain_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/drainkit/drainkit/drain"
)

// blocker is a one-method gRPC service whose calls block until released
// (ignoring their context, as a stuck handler does).
type blocker struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blocker) call(ctx context.Context, req *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	b.entered <- struct{}{}
	<-b.release
	return wrapperspb.String("answer to " + req.GetValue()), nil
}

var blockerDesc = grpc.ServiceDesc{
	ServiceName: "drainkit.test.Blocker",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
		req := new(wrapperspb.StringValue)
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			return srv.(*blocker).call(ctx, req.(*wrapperspb.StringValue))
		}
		if in == nil {
			return h(ctx, req)
		}
		return in(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/drainkit.test.Blocker/Call"}, h)
	}}},
}

// startBlocker serves a blocker with opts and returns a connection to it.
func startBlocker(t *testing.T, opts ...grpc.ServerOption) (*grpc.Server, *blocker, *grpc.ClientConn, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(opts...)
	b := &blocker{entered: make(chan struct{}, 16), release: make(chan struct{})}
	srv.RegisterService(&blockerDesc, b)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(srv.Stop) // after conn.Close (cleanups run last first); a no-op if the test stopped it
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return srv, b, conn, served
}

func callAsync(conn *grpc.ClientConn) <-chan error {
	done := make(chan error, 1)
	go func() {
		out := new(wrapperspb.StringValue)
		done <- conn.Invoke(context.Background(), "/drainkit.test.Blocker/Call", wrapperspb.String("q"), out)
	}()
	return done
}

// Hooks with their own Timeout must not stop the server when the stop
// hook returns: only the end of the whole drain (forced, out of time) may.
func TestGRPCHooksWithTimeoutsAnswerInFlightCall(t *testing.T) {
	tr := drain.NewTracker()
	srv, b, conn, served := startBlocker(t, tr.ServerOptions()...)
	answered := callAsync(conn)
	<-b.entered
	hooks := drain.GRPCHooks("grpc", srv, tr)
	for i := range hooks {
		hooks[i].Timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	report := make(chan *drain.Report, 1)
	waiting := make(chan struct{})
	go func() {
		report <- drain.Run(ctx, "test", hooks, drain.OnPhase(func(p drain.Phase, _ int) {
			if p == drain.WaitInFlight {
				close(waiting)
			}
		}))
	}()
	<-waiting // StopIntake has run and returned: its hook context is gone
	close(b.release)
	require.NoError(t, <-answered, "the in-flight call is answered, not cut off")
	r := <-report
	require.NoError(t, r.Err())
	require.NoError(t, <-served)
	assert.Equal(t, 0, tr.InFlight())
}

// At its deadline WaitInFlight stops the server and returns, even while a
// handler that ignores its context still runs.
func TestGRPCHooksDeadlineDoesNotWaitForStuckHandler(t *testing.T) {
	tr := drain.NewTracker()
	srv, b, conn, served := startBlocker(t, tr.ServerOptions()...)
	answered := callAsync(conn)
	<-b.entered
	hooks := hooksByPhase(drain.GRPCHooks("grpc", srv, tr))
	require.NoError(t, hooks[drain.StopIntake].Run(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, hooks[drain.WaitInFlight].Run(ctx), context.DeadlineExceeded) // would hang if it waited for the handler
	assert.Error(t, <-answered, "the call still running at the deadline is cut off")
	close(b.release) // let the stuck handler end, so nothing leaks past the test
	<-served
}

// Installing the interceptors a second time beside ServerOptions must not
// leave an RPC counted forever.
func TestInterceptorInstalledTwiceStillBalances(t *testing.T) {
	tr := drain.NewTracker()
	_, b, conn, _ := startBlocker(t, append(tr.ServerOptions(), grpc.ChainUnaryInterceptor(tr.UnaryServerInterceptor()))...)
	answered := callAsync(conn)
	<-b.entered
	assert.Equal(t, 2, tr.InFlight(), "counted by both interceptors")
	close(b.release)
	require.NoError(t, <-answered)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tr.Wait(ctx), "both counts end with the RPC")
}
