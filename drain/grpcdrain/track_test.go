package grpcdrain_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/grpcdrain"
)

func TestInterceptors(t *testing.T) {
	tr := new(drain.Tracker)
	unary := grpcdrain.UnaryInterceptor(tr)
	stream := grpcdrain.StreamInterceptor(tr)
	handler := func(ctx context.Context, req any) (any, error) { return !idle(tr), nil }
	shandler := func(srv any, ss grpc.ServerStream) error { return nil }
	tests := []struct {
		method      string
		wantCounted bool // whether the handler sees itself counted
	}{
		{"/drainkit.room.v1.Rooms/Apply", true},
		{"/grpc.health.v1.Health/Check", false},
	}
	for _, tt := range tests {
		got, err := unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: tt.method}, handler)
		require.NoError(t, err)
		if got != tt.wantCounted {
			t.Errorf("%s: handler counted = %v; want %v", tt.method, got, tt.wantCounted)
		}
	}
	tr.CloseIntake()
	_, err := unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x.Y/Z"}, handler)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	err = stream(nil, bgStream{}, &grpc.StreamServerInfo{FullMethod: "/x.Y/Z"}, shandler)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	err = stream(nil, bgStream{}, &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch"}, shandler)
	assert.NoError(t, err, "health checks keep answering while draining")
}

// With the stats handler, an RPC stays in flight after its handler returned
// until grpc-go reports it over (its answer written): a drain that stops
// the server at zero cannot cut an answer off.
func TestStatsHandlerEndsRPCAfterItsAnswer(t *testing.T) {
	tr := new(drain.Tracker)
	sh := grpcdrain.StatsHandler(tr)
	ctx := sh.TagRPC(context.Background(), &stats.RPCTagInfo{FullMethodName: "/x.Y/Z"})
	_, err := grpcdrain.UnaryInterceptor(tr)(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/x.Y/Z"},
		func(context.Context, any) (any, error) { return "answer", nil })
	require.NoError(t, err)
	assert.False(t, idle(tr), "handler returned, answer not yet written: still in flight")
	sh.HandleRPC(ctx, &stats.OutPayload{})
	assert.False(t, idle(tr), "only the End event ends it")
	sh.HandleRPC(ctx, &stats.End{})
	assert.True(t, idle(tr))
	sh.HandleRPC(ctx, &stats.End{}) // a repeated End must not end it twice
	assert.True(t, idle(tr))

	// Without the stats handler the interceptor ends it itself.
	_, err = grpcdrain.UnaryInterceptor(tr)(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x.Y/Z"},
		func(context.Context, any) (any, error) { return nil, nil })
	require.NoError(t, err)
	assert.True(t, idle(tr))

	// A refused RPC is never counted, so its End ends nothing.
	tr.CloseIntake()
	ctx = sh.TagRPC(context.Background(), &stats.RPCTagInfo{FullMethodName: "/x.Y/Z"})
	_, err = grpcdrain.UnaryInterceptor(tr)(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/x.Y/Z"},
		func(context.Context, any) (any, error) { return nil, nil })
	require.True(t, grpcdrain.IsRefused(err))
	sh.HandleRPC(ctx, &stats.End{})
	assert.True(t, idle(tr))
}

// bgStream is a server stream with only a context, for interceptor tests.
type bgStream struct{ grpc.ServerStream }

func (bgStream) Context() context.Context { return context.Background() }

// Closing intake ends the untracked streams (a health Watch), so they
// cannot hold GracefulStop; tracked ones are left to finish.
func TestCloseIntakeEndsUntrackedStreams(t *testing.T) {
	tr := new(drain.Tracker)
	stream := grpcdrain.StreamInterceptor(tr)
	ended := make(chan error, 1)
	go func() {
		ended <- stream(nil, bgStream{}, &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch"},
			func(_ any, ss grpc.ServerStream) error {
				<-ss.Context().Done() // a Watch lives until its context ends
				return ss.Context().Err()
			})
	}()
	tr.CloseIntake()
	assert.ErrorIs(t, <-ended, context.Canceled)
	// A stream that arrives after intake closed is ended at once.
	err := stream(nil, bgStream{}, &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch"},
		func(_ any, ss grpc.ServerStream) error { return ss.Context().Err() })
	assert.ErrorIs(t, err, context.Canceled)
}

// An RPC whose metadata carries drain.ForwardedHeader (set by a peer that
// forwards it to the room's holder) is tracked in flight and refused after
// CloseIntake like any other, but is no arrival: counted, it would keep the
// adaptive delay from seeing a quiet window and advise a longer delay on
// every rollout, as HTTP forwards did before ForwardedHeader.
func TestForwardedRPCsAreTrackedButNoArrival(t *testing.T) {
	tr := new(drain.Tracker)
	_, b, conn, _ := startBlocker(t, grpcdrain.ServerOptions(tr)...)
	forwarded := metadata.AppendToOutgoingContext(context.Background(), drain.ForwardedHeader, "1")
	call := func(ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- conn.Invoke(ctx, "/drainkit.test.Blocker/Call", wrapperspb.String("q"), new(wrapperspb.StringValue))
		}()
		return done
	}

	done := call(forwarded)
	<-b.entered
	assert.False(t, idle(tr), "a forward in its handler: want it in flight")
	close(b.release)
	require.NoError(t, <-done)
	arrived, refused, last := tr.Arrivals()
	assert.Equal(t, [2]uint64{0, 0}, [2]uint64{arrived, refused}, "arrivals and refused after a forward")
	assert.True(t, last.IsZero(), "last arrival after a forward: %v", last)

	require.NoError(t, <-call(context.Background()))
	<-b.entered
	tr.CloseIntake()
	assert.True(t, grpcdrain.IsRefused(<-call(forwarded)), "a forward after CloseIntake: want Refused")
	arrived, refused, _ = tr.Arrivals()
	assert.Equal(t, [2]uint64{1, 0}, [2]uint64{arrived, refused}, "arrivals and refused after one call from a client and a refused forward")
}
