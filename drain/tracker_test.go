package drain_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain"
)

func TestTrackerWaitIsNotified(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := drain.NewTracker()
		require.True(t, tr.Begin())
		require.True(t, tr.Begin())
		done := make(chan error, 1)
		go func() { done <- tr.Wait(context.Background()) }()
		tr.End()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Wait returned with one piece of work still in flight")
		default:
		}
		tr.End()
		synctest.Wait() // no time passes: Wait is woken, not polling
		select {
		case err := <-done:
			require.NoError(t, err)
		default:
			t.Fatal("Wait did not return when the count reached zero")
		}
	})
}

func TestTrackerWaitHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := drain.NewTracker()
		require.True(t, tr.Begin())
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, tr.Wait(ctx), context.DeadlineExceeded)
		assert.Equal(t, 1, tr.InFlight())
		tr.End()
		assert.NoError(t, tr.Wait(context.Background()))
	})
}

func TestTrackerCloseIntake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := drain.NewTracker()
		assert.True(t, tr.LastArrival().IsZero())
		require.True(t, tr.Begin())
		first := tr.LastArrival()
		assert.False(t, first.IsZero())
		tr.CloseIntake()
		tr.CloseIntake() // idempotent
		assert.True(t, tr.IntakeClosed())
		assert.False(t, tr.Begin(), "Begin after CloseIntake must refuse")
		assert.Equal(t, 1, tr.InFlight(), "refused work must not be counted")
		tr.End()
		assert.Equal(t, 0, tr.InFlight())
	})
}

func TestMiddlewareRefusesAfterCloseIntake(t *testing.T) {
	tr := drain.NewTracker()
	called := 0
	h := tr.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called++
		assert.Equal(t, 1, tr.InFlight(), "request must be counted while it runs")
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, http.StatusOK, rec.Code)

	tr.CloseIntake()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "close", rec.Header().Get("Connection"))
	assert.Equal(t, drain.RetryAfter, rec.Header().Get("Retry-After"))
	assert.Equal(t, 1, called, "a refused request must not reach the handler")
	assert.Equal(t, 0, tr.InFlight())
}

func TestInterceptors(t *testing.T) {
	tr := drain.NewTracker()
	unary := tr.UnaryServerInterceptor()
	stream := tr.StreamServerInterceptor()
	handler := func(ctx context.Context, req any) (any, error) { return tr.InFlight(), nil }
	shandler := func(srv any, ss grpc.ServerStream) error { return nil }
	tests := []struct {
		method   string
		wantSeen int // in-flight count the handler sees
	}{
		{"/drainkit.room.v1.Rooms/Apply", 1},
		{"/grpc.health.v1.Health/Check", 0},
	}
	for _, tt := range tests {
		got, err := unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: tt.method}, handler)
		require.NoError(t, err)
		if got != tt.wantSeen {
			t.Errorf("%s: handler saw %v in flight; want %d", tt.method, got, tt.wantSeen)
		}
	}
	tr.CloseIntake()
	_, err := unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x.Y/Z"}, handler)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	err = stream(nil, nil, &grpc.StreamServerInfo{FullMethod: "/x.Y/Z"}, shandler)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	err = stream(nil, bgStream{}, &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch"}, shandler)
	assert.NoError(t, err, "health checks keep answering while draining")
}

func TestRefusedIsDistinguishable(t *testing.T) {
	tests := []struct {
		give error
		want bool
	}{
		{drain.Refused("draining"), true},
		{status.Error(codes.Unavailable, "transport is closing"), false}, // may have been processed
		{status.Error(codes.Internal, "boom"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := drain.IsRefused(tt.give); got != tt.want {
			t.Errorf("IsRefused(%v) = %v; want %v", tt.give, got, tt.want)
		}
	}
	tr := drain.NewTracker()
	tr.CloseIntake()
	_, err := tr.UnaryServerInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x.Y/Z"},
		func(context.Context, any) (any, error) { return nil, nil })
	assert.True(t, drain.IsRefused(err), "the drain's refusal says it processed nothing")
}

// With the stats handler, an RPC stays in flight after its handler returned
// until grpc-go reports it over (its answer written): a drain that stops
// the server at zero cannot cut an answer off.
func TestStatsHandlerEndsRPCAfterItsAnswer(t *testing.T) {
	tr := drain.NewTracker()
	sh := tr.StatsHandler()
	ctx := sh.TagRPC(context.Background(), &stats.RPCTagInfo{FullMethodName: "/x.Y/Z"})
	_, err := tr.UnaryServerInterceptor()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/x.Y/Z"},
		func(context.Context, any) (any, error) { return "answer", nil })
	require.NoError(t, err)
	assert.Equal(t, 1, tr.InFlight(), "handler returned, answer not yet written: still in flight")
	sh.HandleRPC(ctx, &stats.OutPayload{})
	assert.Equal(t, 1, tr.InFlight(), "only the End event ends it")
	sh.HandleRPC(ctx, &stats.End{})
	assert.Equal(t, 0, tr.InFlight())
	sh.HandleRPC(ctx, &stats.End{}) // a repeated End must not count twice
	assert.Equal(t, 0, tr.InFlight())

	// Without the stats handler the interceptor ends it itself.
	_, err = tr.UnaryServerInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x.Y/Z"},
		func(context.Context, any) (any, error) { return nil, nil })
	require.NoError(t, err)
	assert.Equal(t, 0, tr.InFlight())

	// A refused RPC is never counted, so its End ends nothing.
	tr.CloseIntake()
	ctx = sh.TagRPC(context.Background(), &stats.RPCTagInfo{FullMethodName: "/x.Y/Z"})
	_, err = tr.UnaryServerInterceptor()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/x.Y/Z"},
		func(context.Context, any) (any, error) { return nil, nil })
	require.True(t, drain.IsRefused(err))
	sh.HandleRPC(ctx, &stats.End{})
	assert.Equal(t, 0, tr.InFlight())
}

// bgStream is a server stream with only a context, for interceptor tests.
type bgStream struct{ grpc.ServerStream }

func (bgStream) Context() context.Context { return context.Background() }

// Closing intake ends the untracked streams (a health Watch), so they
// cannot hold GracefulStop; tracked ones are left to finish.
func TestCloseIntakeEndsUntrackedStreams(t *testing.T) {
	tr := drain.NewTracker()
	stream := tr.StreamServerInterceptor()
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
