package grpcdrain

import (
	"google.golang.org/grpc/stats"

	"github.com/drainkit/drainkit/drain"
)

// The parts of ServerOptions, for tests that drive them by hand.
var (
	UnaryInterceptor  = unaryInterceptor
	StreamInterceptor = streamInterceptor
)

// StatsHandler is the handler ServerOptions installs.
func StatsHandler(t *drain.Tracker) stats.Handler { return statsHandler{t} }
