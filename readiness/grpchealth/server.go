package grpchealth

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// Server serves grpc.health.v1 in step with a [readiness.Registry], for the
// registry's service name and for "" (the whole server): UNKNOWN while
// starting (the service guide's status for it), NOT_SERVING while not
// ready, SERVING while ready (ok or degraded), and
// NOT_SERVING from [Server.Drain] on, latched, so that no evaluation racing
// the flip reports SERVING again. It wraps a grpc-go [health.Server], whose
// Shutdown leaves Watch streams open for GracefulStop to wait on:
// [Server.Close] ends them; call it just before GracefulStop.
type Server struct {
	reg     *readiness.Registry
	service string
	every   time.Duration // Run's polling interval: the registry's CacheTTL/recheckDivisor, at least minPoll
	hs      *health.Server

	drainOnce sync.Once
	drained   chan struct{}
	running   chan struct{} // size 1: the flip to Running wakes Run (OnTransition)

	// closing ends Watch streams; a context so that each stream can hang a
	// cancel on it with context.AfterFunc instead of a goroutine.
	closing context.Context
	close   context.CancelFunc
}

// NewServer returns a Server for reg's service, answering UNKNOWN until
// [Server.Run] first sees the process, or an error for a nil reg.
func NewServer(reg *readiness.Registry) (*Server, error) {
	if reg == nil {
		return nil, errors.New("grpchealth: NewServer: reg is nil")
	}
	cfg := reg.Config()
	s := &Server{
		reg:     reg,
		service: cfg.Service,
		every:   max(cfg.CacheTTL/recheckDivisor, minPoll),
		hs:      health.NewServer(),
		drained: make(chan struct{}),
		running: make(chan struct{}, 1),
	}
	s.closing, s.close = context.WithCancel(context.Background())
	// health.NewServer starts with "" SERVING: not true of a starting process.
	s.set(healthpb.HealthCheckResponse_UNKNOWN)
	return s, nil
}

// Register registers the server as r's grpc.health.v1.Health service; a
// nil r panics.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	if r == nil {
		panic("grpchealth: Register: r is nil")
	}
	// The RPC methods live on an unexported type: callers drive the Server
	// through Run, Drain and Close, never through Check or Watch.
	healthpb.RegisterHealthServer(r, healthService{s: s})
}

// Run updates the serving status until ctx ends or the server is drained,
// every tenth of the registry's CacheTTL (at least 10 ms apart), so that a
// change is served as soon as the registry's next evaluation lands: a poll
// that finds the results expired starts that evaluation and answers from
// the last one, and only the next poll reads it. Polling once per CacheTTL
// served a failure up to three CacheTTLs late. It runs no check more
// often: the registry answers from its last result in between
// (docs/readiness.md).
func (s *Server) Run(ctx context.Context) error {
	t := time.NewTimer(s.every)
	defer t.Stop()
	for {
		s.update(ctx)
		t.Reset(s.every)
		select {
		case <-ctx.Done():
			return nil
		case <-s.drained:
			return nil
		case <-s.running:
		case <-t.C:
		}
	}
}

// recheckDivisor divides CacheTTL into Run's polling interval, half of how
// long the registry keeps a failing evaluation (CacheTTL/failingDivisor in
// readiness/registry.go, a fifth; change both together): a change is
// served at most a tenth of CacheTTL after the evaluation that saw it.
const recheckDivisor = 10

// minPoll floors Run's polling interval. A registry that caches nothing (a
// CacheTTL of nanoseconds, whose tenth is zero) would otherwise be polled
// in a tight loop, its checks run back to back. A hundred polls a second is
// still far more often than any balancer or kubelet probes.
const minPoll = 10 * time.Millisecond

// update sets the serving status from one ready probe of the registry.
func (s *Server) update(ctx context.Context) {
	rep := s.reg.Ready(ctx)
	switch {
	case rep.State == lifecycle.Draining || rep.State == lifecycle.Stopped:
		s.Drain()
	case rep.State == lifecycle.Starting:
		s.set(healthpb.HealthCheckResponse_UNKNOWN)
	case rep.Status == readiness.StatusFail:
		s.set(healthpb.HealthCheckResponse_NOT_SERVING)
	default:
		s.set(healthpb.HealthCheckResponse_SERVING)
	}
}

// OnTransition keeps the status in step with the lifecycle's flips: at the
// one to Running it has Run evaluate at once, not at its next poll (up to a
// tenth of CacheTTL later), so that gRPC health turns SERVING with the HTTP
// readiness; at the one to Draining it calls [Server.Drain]. Register it
// with the lifecycle manager's OnTransition, as
// [readiness.Registry.OnTransition]; it does not block.
func (s *Server) OnTransition(t lifecycle.Transition) {
	switch t.To {
	case lifecycle.Running:
		select {
		case s.running <- struct{}{}:
		default: // a wake is pending already
		}
	case lifecycle.Draining:
		s.Drain()
	}
}

// Drain latches NOT_SERVING for good and pushes it to every watcher. It is
// synchronous and does not block: [Server.OnTransition] calls it at the
// transition to Draining, so that gRPC health flips with the state; call it
// yourself only without a lifecycle manager.
func (s *Server) Drain() {
	s.drainOnce.Do(func() {
		s.hs.Shutdown()
		close(s.drained)
	})
}

// Close drains the server and ends every Watch stream, so that the gRPC
// server's GracefulStop does not wait for watchers; Watch calls made after
// Close fail at once with UNAVAILABLE. Call it right before GracefulStop,
// once load balancers have seen NOT_SERVING.
func (s *Server) Close() {
	s.Drain()
	s.close()
}

func (s *Server) set(st healthpb.HealthCheckResponse_ServingStatus) {
	// SetServingStatus is a no-op once Shutdown has latched the server.
	s.hs.SetServingStatus(s.service, st)
	s.hs.SetServingStatus("", st)
}

// healthService is the grpc.health.v1.Health implementation of a Server.
type healthService struct {
	healthpb.UnimplementedHealthServer
	s *Server
}

func (h healthService) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return h.s.hs.Check(ctx, req)
}

func (h healthService) List(ctx context.Context, req *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	return h.s.hs.List(ctx, req)
}

// Watch streams the status like health.Server, and ends at [Server.Close].
func (h healthService) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	if h.s.closing.Err() != nil {
		// No message first: grpc-go clients then back off before retrying
		// instead of re-watching in a tight loop until GOAWAY arrives.
		return status.Error(codes.Unavailable, "grpchealth: server stopping")
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stop := context.AfterFunc(h.s.closing, cancel)
	defer stop()
	return h.s.hs.Watch(req, watchStream{stream, ctx})
}

// watchStream replaces a Watch stream's context, which health.Server selects
// on to end the stream.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (s watchStream) Context() context.Context { return s.ctx }
