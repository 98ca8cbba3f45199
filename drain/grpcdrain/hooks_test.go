package grpcdrain_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/grpcdrain"
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

// idle reports whether tr counts nothing in flight: Wait answers from the
// count before it looks at its context.
func idle(tr *drain.Tracker) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return tr.Wait(ctx) == nil
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
func TestHooksWithTimeoutsAnswerInFlightCall(t *testing.T) {
	tr := new(drain.Tracker)
	srv, b, conn, served := startBlocker(t, grpcdrain.ServerOptions(tr)...)
	answered := callAsync(conn)
	<-b.entered
	hooks := grpcdrain.Hooks("grpc", srv, tr)
	for i := range hooks {
		hooks[i].Timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	report := make(chan *drain.Report, 1)
	waiting := make(chan struct{})
	marker := drain.Hook{Name: "wait_in_flight began", Phase: drain.WaitInFlight, Run: func(context.Context) error {
		close(waiting)
		return nil
	}}
	go func() { report <- drain.Run(ctx, "test", append(hooks, marker)) }()
	<-waiting // StopIntake has run and returned: its hook context is gone
	close(b.release)
	require.NoError(t, <-answered, "the in-flight call is answered, not cut off")
	r := <-report
	require.NoError(t, r.Err())
	require.NoError(t, <-served)
	assert.True(t, idle(tr))
}

// At its deadline WaitInFlight stops the server and returns, even while a
// handler that ignores its context still runs.
func TestHooksDeadlineDoesNotWaitForStuckHandler(t *testing.T) {
	tr := new(drain.Tracker)
	srv, b, conn, served := startBlocker(t, grpcdrain.ServerOptions(tr)...)
	answered := callAsync(conn)
	<-b.entered
	hooks := hooksByPhase(grpcdrain.Hooks("grpc", srv, tr))
	require.NoError(t, hooks[drain.StopIntake].Run(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, hooks[drain.WaitInFlight].Run(ctx), context.DeadlineExceeded) // would hang if it waited for the handler
	assert.Error(t, <-answered, "the call still running at the deadline is cut off")
	close(b.release) // let the stuck handler end, so nothing leaks past the test
	<-served
}

// grpc-go's Stop and GracefulStop wait for every connection still in its
// handshake, for up to the server's ConnectionTimeout (120 s by default): a
// client that connected and sent nothing must not keep the drain past its
// deadline. The hooks' Stop at their deadline and their Abort once waited
// for it.
func TestHooksDoNotWaitForAHandshakeAtTheDeadline(t *testing.T) {
	tests := []struct {
		name  string
		drain func(srv *grpc.Server, tr *drain.Tracker) error
	}{
		{"graceful_stop at its deadline", func(srv *grpc.Server, tr *drain.Tracker) error {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			err := hooksByPhase(grpcdrain.Hooks("grpc", srv, tr))[drain.Release].Run(ctx)
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "a connection still in its handshake") {
				return fmt.Errorf("graceful_stop returned %v; want %v, saying what GracefulStop waits for", err, context.DeadlineExceeded)
			}
			return nil
		}},
		{"Abort of a forced drain", func(srv *grpc.Server, tr *drain.Tracker) error {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if r := drain.Run(ctx, "test", grpcdrain.Hooks("grpc", srv, tr)); !r.Forced {
				return fmt.Errorf("report %+v; want a forced drain", r)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := new(drain.Tracker)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			srv := grpc.NewServer(append(grpcdrain.ServerOptions(tr), grpc.ConnectionTimeout(time.Hour))...)
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			raw, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			require.NoError(t, raw.SetReadDeadline(time.Now().Add(10*time.Second)))
			_, err = raw.Read(make([]byte, 1)) // the server's SETTINGS: its handshake now waits for a preface that never comes
			require.NoError(t, err)

			drained := make(chan error, 1)
			go func() { drained <- tt.drain(srv, tr) }()
			guard := time.NewTimer(10 * time.Second)
			defer guard.Stop()
			select {
			case err := <-drained:
				assert.NoError(t, err)
			case <-guard.C:
				t.Error("still waiting for Stop 10 s after the drain's end")
				defer func() { <-drained }()
			}
			assert.Empty(t, served, "Stop returned with the handshake still pending: the test proves nothing")
			raw.Close() // ends the handshake, and so Stop
			require.NoError(t, <-served)
		})
	}
}

// Installing the interceptors a second time beside ServerOptions must not
// leave an RPC counted forever.
func TestInterceptorInstalledTwiceStillBalances(t *testing.T) {
	tr := new(drain.Tracker)
	_, b, conn, _ := startBlocker(t, append(grpcdrain.ServerOptions(tr), grpc.ChainUnaryInterceptor(grpcdrain.UnaryInterceptor(tr)))...)
	answered := callAsync(conn)
	<-b.entered
	assert.False(t, idle(tr), "the call is counted while it runs")
	close(b.release)
	require.NoError(t, <-answered)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tr.Wait(ctx), "both counts end with the RPC")
}

func TestHooksDoNotWaitForHealthWatch(t *testing.T) {
	tr := new(drain.Tracker)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpcdrain.ServerOptions(tr)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	watch, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = watch.Recv() // the stream is established and open
	require.NoError(t, err)

	hooks := hooksByPhase(grpcdrain.Hooks("grpc", srv, tr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, hooks[drain.StopIntake].Run(ctx))
	require.NoError(t, hooks[drain.WaitInFlight].Run(ctx), "an open Watch stream must not hold the drain to its deadline")
	require.NoError(t, <-served)
	for { // the stream is ended by the server, not left dangling
		if _, err := watch.Recv(); err != nil {
			break
		}
	}
}

func TestHooksForcedAfterStopIntake(t *testing.T) {
	tr := new(drain.Tracker)
	srv, b, conn, served := startBlocker(t, grpcdrain.ServerOptions(tr)...)
	answered := callAsync(conn)
	<-b.entered // a tracked call GracefulStop would wait for
	defer close(b.release)
	forceAfterStopIntake(t, hooksByPhase(grpcdrain.Hooks("grpc", srv, tr)))
	assert.Error(t, <-answered, "the in-flight call is cut off by the hard stop")
	require.NoError(t, <-served)
}

func hooksByPhase(hooks []drain.Hook) map[drain.Phase]drain.Hook {
	m := map[drain.Phase]drain.Hook{}
	for _, h := range hooks {
		m[h.Phase] = h
	}
	return m
}

// forceAfterStopIntake runs hooks in a drain that a second signal cuts
// short as StopIntake ends: WaitInFlight is skipped, so only the hooks'
// Abort can close the server.
func forceAfterStopIntake(t *testing.T, hooks map[drain.Phase]drain.Hook) *drain.Report {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signal := drain.Hook{Name: "second-signal", Phase: drain.StopIntake, Run: func(context.Context) error {
		cancel()
		return nil
	}}
	rep := drain.Run(ctx, "test", []drain.Hook{hooks[drain.StopIntake], signal, hooks[drain.WaitInFlight]})
	require.True(t, rep.Forced)
	return rep
}
