package grpcdrain

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"

	"github.com/drainkit/drainkit/drain"
)

// ServerOptions returns the gRPC server options that count RPCs in t: a
// unary and a stream interceptor, which refuse new RPCs with [Refused]
// after CloseIntake, and a stats handler, which keeps an RPC counted until
// its answer is written. Use them all:
//
//	grpc.NewServer(append(grpcdrain.ServerOptions(t), yourOptions...)...)
//
// An RPC whose metadata carries [drain.ForwardedHeader], from a peer that
// forwarded it, is counted with [drain.Tracker.BeginForwarded]: no arrival.
// Given a [drain.Streams], server-streaming RPCs are registered with it
// instead of counted in flight (each is still an arrival). A stream the
// drain closed ends with [Refused] if its handler returns nil or a context
// error, else with the handler's error.
// A nil t or more than one Streams panics: a mistake in building the
// server, and an error return would not fit the append form above.
func ServerOptions(t *drain.Tracker, streams ...*drain.Streams) []grpc.ServerOption {
	if t == nil {
		panic("grpcdrain: ServerOptions: t is nil; want the manager's Tracker")
	}
	if len(streams) > 1 {
		panic(fmt.Sprintf("grpcdrain: ServerOptions given %d Streams; want at most one per server", len(streams)))
	}
	var s *drain.Streams
	if len(streams) == 1 {
		s = streams[0]
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unaryInterceptor(t)),
		grpc.ChainStreamInterceptor(streamInterceptor(t, s)),
		grpc.StatsHandler(statsHandler{t}),
	}
}

// untracked reports whether an RPC is left out of in-flight counting:
// grpc.health.v1, whose Watch streams would hold every drain to its
// deadline and which must answer through the drain.
func untracked(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/")
}

// forwardedKey is [drain.ForwardedHeader] as a metadata key: lower case,
// so that the look-up per RPC finds it without copying the metadata.
var forwardedKey = strings.ToLower(drain.ForwardedHeader)

// begin is t.Begin, or t.BeginForwarded for an RPC whose metadata carries
// [drain.ForwardedHeader] with a non-empty value, as the HTTP middleware
// reads the header.
func begin(ctx context.Context, t *drain.Tracker) bool {
	for _, v := range metadata.ValueFromIncomingContext(ctx, forwardedKey) {
		if v != "" {
			return t.BeginForwarded()
		}
	}
	return t.Begin()
}

// unaryInterceptor counts unary RPCs in flight, until the stats handler
// ends them if it is installed, and refuses new ones after CloseIntake.
func unaryInterceptor(t *drain.Tracker) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if untracked(info.FullMethod) {
			return handler(ctx, req)
		}
		if !begin(ctx, t) {
			return nil, errIntakeClosed
		}
		if !handOver(ctx) {
			defer t.End()
		}
		return handler(ctx, req)
	}
}

// streamInterceptor counts streaming RPCs in flight and refuses new ones
// after CloseIntake; with s, it registers server streams with s instead.
// Untracked streams end when intake closes, so a Watch cannot keep
// GracefulStop from returning.
func streamInterceptor(t *drain.Tracker, s *drain.Streams) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if untracked(info.FullMethod) {
			ctx, release := endWithIntake(ss.Context(), t)
			defer release()
			return handler(srv, ctxStream{ss, ctx})
		}
		if s != nil && info.IsServerStream {
			// An arrival like any RPC, for the drain report and the adaptive
			// delay, but not in flight: s closes it, paced.
			if !begin(ss.Context(), t) {
				return errIntakeClosed
			}
			t.End()
			return serveStream(s, srv, ss, handler)
		}
		if !begin(ss.Context(), t) {
			return errIntakeClosed
		}
		if !handOver(ss.Context()) {
			defer t.End()
		}
		return handler(srv, ss)
	}
}

// endWithIntake returns a context that also ends when t's intake closes,
// and the function that releases it when the stream ends. The goroutine
// that watches intake is the stream's: release waits for it.
func endWithIntake(parent context.Context, t *drain.Tracker) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	closed := t.IntakeClosed()
	select {
	case <-closed: // already closed: end the stream now, not on another goroutine later
		cancel()
		return ctx, cancel
	default:
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(); <-done }
}

// ctxStream is a server stream with a context the tracker can cancel.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

// statsHandler ends each RPC counted by the interceptors once grpc-go has
// handed its response to the transport. An interceptor alone would end it
// as the handler returns, and a drain stopping the server then would cut
// off an answer the client cannot tell from a failure.
type statsHandler struct{ t *drain.Tracker }

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

func (s statsHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, rpcMarkKey{}, &rpcMark{})
}

func (s statsHandler) HandleRPC(ctx context.Context, st stats.RPCStats) {
	if _, end := st.(*stats.End); !end {
		return
	}
	if m, ok := ctx.Value(rpcMarkKey{}).(*rpcMark); ok {
		for n := m.counted.Swap(0); n > 0; n-- {
			s.t.End()
		}
	}
}

func (statsHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (statsHandler) HandleConn(context.Context, stats.ConnStats)                       {}
