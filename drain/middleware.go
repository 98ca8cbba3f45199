package drain

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// RetryAfter is the Retry-After value, in seconds, sent with the 503 that
// refuses a request after CloseIntake. One second is long enough for a load
// balancer to have another backend ready and short enough not to stall a
// client that retries.
const RetryAfter = "1"

// Middleware wraps next so that each request is counted in flight. After
// CloseIntake a new request is refused with 503, Retry-After and
// Connection: close, before next sees it, so a client or load balancer may
// safely retry it elsewhere.
func (t *Tracker) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !t.Begin() {
			h := w.Header()
			h.Set("Connection", "close")
			h.Set("Retry-After", RetryAfter)
			http.Error(w, "draining: retry on another instance", http.StatusServiceUnavailable)
			return
		}
		defer t.End()
		next.ServeHTTP(w, r)
	})
}

// untracked reports whether an RPC is left out of in-flight counting. The
// grpc.health.v1 service is: a Watch stream lives as long as its client,
// so counting it would hold every drain until the deadline, and health
// checks must keep answering (NOT_SERVING) while the process drains.
func untracked(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/")
}

// errIntakeClosed is what a refused RPC gets: UNAVAILABLE with a RetryInfo
// detail. A client cannot tell a bare UNAVAILABLE from a connection that
// broke after the server had processed the call; the detail says this
// server refused the call before processing it, so a retry elsewhere is
// safe.
var errIntakeClosed = Refused("drain: server is draining; retry on another instance")

// Refused returns an UNAVAILABLE status carrying a RetryInfo detail (retry
// after [RetryAfter] seconds): the form in which a server says it did
// nothing with the call. Use it for every "not processed, retry" answer so
// clients can rely on the detail (see [IsRefused]).
func Refused(msg string) error {
	st, err := status.New(codes.Unavailable, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	if err != nil { // only if the detail cannot be marshalled, which a RetryInfo always can
		return status.Error(codes.Unavailable, msg)
	}
	return st.Err()
}

// IsRefused reports whether err is a server's statement that it did not
// process the call: UNAVAILABLE with a RetryInfo detail, as [Refused] makes.
func IsRefused(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return true
		}
	}
	return false
}

// ServerOptions returns the gRPC server options that count RPCs in flight:
// the two interceptors and the stats handler. Use them all:
//
//	grpc.NewServer(append(tracker.ServerOptions(), yourOptions...)...)
func (t *Tracker) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(t.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(t.StreamServerInterceptor()),
		grpc.StatsHandler(t.StatsHandler()),
	}
}

// UnaryServerInterceptor counts unary RPCs in flight and refuses new ones
// with [Refused] after CloseIntake. Health checks are not counted. With
// [Tracker.StatsHandler] installed an RPC stays counted until its response
// has been written; without it, only until its handler returns.
func (t *Tracker) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if untracked(info.FullMethod) {
			return handler(ctx, req)
		}
		if !t.Begin() {
			return nil, errIntakeClosed
		}
		if !handOver(ctx) {
			defer t.End()
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor counts streaming RPCs in flight for as long as the
// stream lives and refuses new ones with [Refused] after CloseIntake.
// Health Watch streams are not counted.
//
// Untracked streams are not waited for; instead they are ended (their
// context cancelled) when intake closes, so a long-lived Watch cannot keep
// GracefulStop from returning.
func (t *Tracker) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if untracked(info.FullMethod) {
			ctx, release := t.holdStream(ss.Context())
			defer release()
			return handler(srv, ctxStream{ss, ctx})
		}
		if !t.Begin() {
			return errIntakeClosed
		}
		if !handOver(ss.Context()) {
			defer t.End()
		}
		return handler(srv, ss)
	}
}

// StatsHandler returns a stats handler that ends each RPC counted by the
// interceptors when grpc-go reports the RPC over, which is after its
// response and status were handed to the transport (GRPCHooks then waits
// for GracefulStop, which flushes them). The interceptors alone end it when
// the handler returns, before the response is on the wire, and a drain
// that stops the server at that moment cuts off an answer the client then
// cannot tell from a failure.
func (t *Tracker) StatsHandler() stats.Handler { return trackerStats{t} }

// rpcMark is put in each RPC's context by the stats handler; the
// interceptor adds one to counted for each Begin it hands over (one, unless
// the interceptor is installed twice), and the End event ends them all.
type rpcMark struct{ counted atomic.Int32 }

type rpcMarkKey struct{}

// handOver tells the RPC's stats handler (if installed) to end it; it
// reports false when there is none and the interceptor must end it itself.
func handOver(ctx context.Context) bool {
	m, ok := ctx.Value(rpcMarkKey{}).(*rpcMark)
	if ok {
		m.counted.Add(1)
	}
	return ok
}

type trackerStats struct{ t *Tracker }

func (s trackerStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, rpcMarkKey{}, &rpcMark{})
}

func (s trackerStats) HandleRPC(ctx context.Context, st stats.RPCStats) {
	if _, end := st.(*stats.End); !end {
		return
	}
	if m, ok := ctx.Value(rpcMarkKey{}).(*rpcMark); ok {
		for n := m.counted.Swap(0); n > 0; n-- {
			s.t.End()
		}
	}
}

func (trackerStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (trackerStats) HandleConn(context.Context, stats.ConnStats)                       {}

// ctxStream is a server stream with a context the tracker can cancel.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }
