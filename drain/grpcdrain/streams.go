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

// serveStream runs a server stream registered with s: refused once the
// drain has begun, its context cancelled when its turn to close comes.
func serveStream(s *drain.Streams, srv any, ss grpc.ServerStream, handler grpc.StreamHandler) error {
	ctx, end, ok := s.Open(ss.Context())
	if !ok {
		return errIntakeClosed
	}
	defer end()
	err := handler(srv, ctxStream{ss, ctx})
	if ctx.Err() != nil && ss.Context().Err() == nil && endedByContext(err) {
		return errStreamClosed // the drain closed it, not the client
	}
	return err
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
