package grpcdrain

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain"
)

// errStreamClosed ends a stream that the drain closed: the server is going
// away and the client should follow from where it was on another instance.
var errStreamClosed = Refused("grpcdrain: server is draining; reconnect to another instance")

// Streams returns the server option that registers every server-streaming
// and bidirectional RPC with s (grpc.health.v1 aside: [ServerOptions] ends
// its Watch streams when intake closes), so that a drain with s's hooks
// closes them paced instead of GracefulStop waiting for them until the
// deadline:
//
//	grpc.NewServer(append(grpcdrain.ServerOptions(t), grpcdrain.Streams(s))...)
//
// When its turn comes the stream's context is cancelled; once the handler
// returns, nil or a context error, the client gets [Refused]
// (UNAVAILABLE with RetryInfo), which says: reconnect elsewhere, from your
// position. A handler's own error is passed on as it is. A stream opened
// after the drain began is refused the same way.
func Streams(s *drain.Streams) grpc.ServerOption {
	return grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if untracked(info.FullMethod) || !info.IsServerStream {
			return handler(srv, ss)
		}
		st, ok := s.Open(ss.Context())
		if !ok {
			return errIntakeClosed
		}
		defer st.End()
		err := handler(srv, ctxStream{ss, st.Context()})
		if st.Context().Err() != nil && ss.Context().Err() == nil && endedByContext(err) {
			return errStreamClosed // the drain closed it, not the client
		}
		return err
	})
}

// endedByContext reports whether a handler's error says no more than that
// its context ended.
func endedByContext(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	c := status.Code(err)
	return c == codes.Canceled || c == codes.DeadlineExceeded
}
