package grpcdrain_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/grpcdrain"
)

// follow is a server-streaming handler as a subscription is written: one
// message, then wait for more until the context ends.
func follow(_ any, ss grpc.ServerStream) error {
	if err := ss.SendMsg(wrapperspb.String("hello")); err != nil {
		return err
	}
	<-ss.Context().Done()
	return ss.Context().Err()
}

var feedDesc = grpc.ServiceDesc{
	ServiceName: "drainkit.test.Feed",
	HandlerType: (*any)(nil),
	Streams:     []grpc.StreamDesc{{StreamName: "Follow", Handler: follow, ServerStreams: true}},
}

var followDesc = &grpc.StreamDesc{StreamName: "Follow", ServerStreams: true}

// ending is how a stream ended, and when.
type ending struct {
	err error
	at  time.Time
}

// subscribe opens a Follow stream, reads its first message, and returns how
// it ends.
func subscribe(t *testing.T, conn *grpc.ClientConn) <-chan ending {
	t.Helper()
	cs, err := conn.NewStream(context.Background(), followDesc, "/drainkit.test.Feed/Follow")
	require.NoError(t, err)
	require.NoError(t, cs.SendMsg(wrapperspb.String("room 1")))
	require.NoError(t, cs.CloseSend())
	require.NoError(t, cs.RecvMsg(new(wrapperspb.StringValue)), "the first message: the stream is registered")
	ended := make(chan ending, 1)
	go func() {
		for {
			if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
				ended <- ending{err, time.Now()}
				return
			}
		}
	}()
	return ended
}

// A drain closes server streams paced, each with "reconnect elsewhere", and
// GracefulStop waits neither for them until the deadline nor for a client's
// health Watch.
func TestStreamsDrainServerStreams(t *testing.T) {
	const n = 10
	tr := new(drain.Tracker)
	s, err := drain.NewStreams(drain.StreamsConfig{Name: "grpc_streams", Margin: 300 * time.Millisecond})
	require.NoError(t, err)
	watching := make(chan struct{}, 1)
	noteWatch := grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if strings.HasSuffix(info.FullMethod, "/Watch") {
			select {
			case watching <- struct{}{}:
			default:
			}
		}
		return h(srv, ss)
	})
	srv := grpc.NewServer(append(grpcdrain.ServerOptions(tr, s), noteWatch)...)
	srv.RegisterService(&feedDesc, nil)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	// grpc-go's client-side health checking: the client watches the
	// server's health for as long as it is connected.
	conn, err := grpc.NewClient(ln.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}}`))
	require.NoError(t, err)
	defer conn.Close()
	ended := make([]<-chan ending, n)
	for i := range ended {
		ended[i] = subscribe(t, conn)
	}
	<-watching

	// The flush phase runs while the streams are closed paced, not after.
	var flushed time.Time
	flush := drain.Hook{Name: "flush", Phase: drain.Flush, Run: func(context.Context) error { flushed = time.Now(); return nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r := drain.Run(ctx, "test", append(append(grpcdrain.Hooks("grpc", srv, tr), s.Hooks()...), flush))
	require.NoError(t, r.Err(), "GracefulStop held by a stream or the health Watch")
	require.NoError(t, <-served)
	rep, _ := r.Hook("grpc_streams.close")
	require.NotNil(t, rep.Streams)
	assert.Equal(t, n, rep.Streams.Told)
	assert.Equal(t, n, rep.Streams.Paced+rep.Streams.Hard)
	var last time.Time
	for _, e := range ended {
		got := <-e
		assert.True(t, grpcdrain.IsRefused(got.err), "stream ended with %v; want UNAVAILABLE with RetryInfo", got.err)
		if got.at.After(last) {
			last = got.at
		}
	}
	assert.True(t, flushed.Before(last), "flush ran %v after the last stream ended; want it while they are closed", flushed.Sub(last))
}

// A server stream given to Streams is an arrival like any RPC, and one
// refused after intake closed is counted refused: the drain report's
// arrivals, its advice and the adaptive delay saw no stream at all, so a
// stream-heavy service ended its delay "quiet" and reported 0 refused.
func TestServerStreamsAreArrivals(t *testing.T) {
	tr := new(drain.Tracker)
	s, err := drain.NewStreams(drain.StreamsConfig{Name: "feed"})
	require.NoError(t, err)
	srv := grpc.NewServer(grpcdrain.ServerOptions(tr, s)...)
	srv.RegisterService(&feedDesc, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() { srv.Stop(); <-served }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()

	ended := subscribe(t, conn)
	arrived, refused, last := tr.Arrivals()
	assert.Equal(t, [2]uint64{1, 0}, [2]uint64{arrived, refused}, "arrivals and refused after one stream")
	assert.False(t, last.IsZero(), "the last arrival's time after one stream")
	assert.True(t, idle(tr), "a stream Streams closes is not waited for in flight")

	tr.CloseIntake()
	hooks := s.Hooks()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, hooks[0].Run(ctx)) // told: the streams are closed from now on
	cs, err := conn.NewStream(context.Background(), followDesc, "/drainkit.test.Feed/Follow")
	require.NoError(t, err)
	require.NoError(t, cs.SendMsg(wrapperspb.String("room 1")))
	require.NoError(t, cs.CloseSend())
	require.True(t, grpcdrain.IsRefused(cs.RecvMsg(new(wrapperspb.StringValue))), "a stream after intake closed: want Refused")
	arrived, refused, _ = tr.Arrivals()
	assert.Equal(t, [2]uint64{2, 1}, [2]uint64{arrived, refused}, "arrivals and refused after a stream refused")
	require.NoError(t, hooks[1].Run(ctx))
	<-ended
}

func TestStreamsInterceptorPassesHandlerErrorsOn(t *testing.T) {
	s, err := drain.NewStreams(drain.StreamsConfig{Name: "x"})
	require.NoError(t, err)
	srv := grpc.NewServer(grpcdrain.ServerOptions(new(drain.Tracker), s)...)
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "drainkit.test.Feed",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Follow", ServerStreams: true, Handler: func(any, grpc.ServerStream) error {
			return grpcdrain.Refused("no such room") // not the drain's doing
		}}},
	}, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	cs, err := conn.NewStream(context.Background(), followDesc, "/drainkit.test.Feed/Follow")
	require.NoError(t, err)
	require.NoError(t, cs.CloseSend())
	err = cs.RecvMsg(new(wrapperspb.StringValue))
	assert.ErrorContains(t, err, "no such room")
}

// A server has one Streams: a second would be left undrained, so it is
// refused where the server is built.
func TestServerOptionsRefusesASecondStreams(t *testing.T) {
	a, err := drain.NewStreams(drain.StreamsConfig{Name: "a"})
	require.NoError(t, err)
	b, err := drain.NewStreams(drain.StreamsConfig{Name: "b"})
	require.NoError(t, err)
	assert.PanicsWithValue(t, "grpcdrain: ServerOptions given 2 Streams; want at most one per server", func() {
		grpcdrain.ServerOptions(new(drain.Tracker), a, b)
	})
	assert.NotPanics(t, func() { grpcdrain.ServerOptions(new(drain.Tracker), a) }, "one Streams")
	assert.NotPanics(t, func() { grpcdrain.ServerOptions(new(drain.Tracker)) }, "none")
}

// A nil tracker is refused where the server is built, as a second Streams
// is, not by a panic in the first RPC's interceptor.
func TestServerOptionsRefusesANilTracker(t *testing.T) {
	assert.PanicsWithValue(t, "grpcdrain: ServerOptions: t is nil; want the manager's Tracker", func() {
		grpcdrain.ServerOptions(nil)
	})
}
