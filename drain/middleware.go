package drain

import (
	"context"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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

// errIntakeClosed is what a refused RPC gets: UNAVAILABLE tells gRPC clients
// the call was not processed and may be retried on another backend.
var errIntakeClosed = status.Error(codes.Unavailable, "drain: server is draining; retry on another instance")

// UnaryServerInterceptor counts unary RPCs in flight and refuses new ones
// with codes.Unavailable after CloseIntake. Health checks are not counted.
func (t *Tracker) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if untracked(info.FullMethod) {
			return handler(ctx, req)
		}
		if !t.Begin() {
			return nil, errIntakeClosed
		}
		defer t.End()
		return handler(ctx, req)
	}
}

// StreamServerInterceptor counts streaming RPCs in flight for as long as the
// stream lives and refuses new ones with codes.Unavailable after
// CloseIntake. Health Watch streams are not counted.
func (t *Tracker) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if untracked(info.FullMethod) {
			return handler(srv, ss)
		}
		if !t.Begin() {
			return errIntakeClosed
		}
		defer t.End()
		return handler(srv, ss)
	}
}
