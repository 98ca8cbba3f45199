package grpcdrain

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/drainkit/drainkit/drain"
)

// The parts of ServerOptions, for tests that drive them by hand.
var UnaryInterceptor = unaryInterceptor

// StreamInterceptor is the stream interceptor of ServerOptions(t).
func StreamInterceptor(t *drain.Tracker) grpc.StreamServerInterceptor {
	return streamInterceptor(t, nil)
}

// StatsHandler is the handler ServerOptions installs.
func StatsHandler(t *drain.Tracker) stats.Handler { return statsHandler{t} }
