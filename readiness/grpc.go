package readiness

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/lifecycle"
)

// GRPCBridge serves grpc.health.v1 in step with a [Registry], for the
// registry's service name and for "" (the whole server):
//
//   - NOT_SERVING while starting or not ready,
//   - SERVING while ready (ok or degraded),
//   - NOT_SERVING from [GRPCBridge.Drain] on, latched: later updates are ignored,
//     so no evaluation racing the flip can report SERVING again.
//
// It wraps a grpc-go [health.Server]. That server's Shutdown latches
// NOT_SERVING but leaves Watch streams open, and GracefulStop waits for every
// open stream, so a watcher that does not cancel its stream on GOAWAY would
// hold the server up until the drain deadline. [GRPCBridge.Close] ends the
// Watch streams; call it just before GracefulStop.
type GRPCBridge struct {
	healthpb.UnimplementedHealthServer

	reg     *Registry
	service string
	hs      *health.Server

	drainOnce sync.Once
	drained   chan struct{}

	// closing ends Watch streams; a context so that each stream can hang a
	// cancel on it with context.AfterFunc instead of a goroutine.
	closing context.Context
	close   context.CancelFunc
}

// NewGRPCBridge returns a bridge for reg's service, answering NOT_SERVING
// until [GRPCBridge.Run] (or [GRPCBridge.Update]) sees the process ready.
func NewGRPCBridge(reg *Registry) *GRPCBridge {
	b := &GRPCBridge{
		reg:     reg,
		service: reg.cfg.Service,
		hs:      health.NewServer(),
		drained: make(chan struct{}),
	}
	b.closing, b.close = context.WithCancel(context.Background())
	// health.NewServer starts with "" SERVING: not true of a starting process.
	b.set(healthpb.HealthCheckResponse_NOT_SERVING)
	return b
}

// Register registers the bridge as s's grpc.health.v1.Health service.
func (b *GRPCBridge) Register(s grpc.ServiceRegistrar) {
	healthpb.RegisterHealthServer(s, b)
}

// Run updates the serving status every CacheTTL of the registry until ctx
// ends or the bridge is drained. It shares the registry's cached
// evaluations with HTTP probes, so it adds no check executions.
func (b *GRPCBridge) Run(ctx context.Context) error {
	t := time.NewTicker(b.reg.cfg.CacheTTL)
	defer t.Stop()
	for {
		b.Update(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-b.drained:
			return nil
		case <-t.C:
		}
	}
}

// Update sets the serving status from one ready probe of the registry.
func (b *GRPCBridge) Update(ctx context.Context) {
	rep := b.reg.Ready(ctx)
	switch {
	case rep.Reason == lifecycle.Draining.String() || rep.Reason == lifecycle.Stopped.String():
		b.Drain()
	case rep.Status == StatusFail:
		b.set(healthpb.HealthCheckResponse_NOT_SERVING)
	default:
		b.set(healthpb.HealthCheckResponse_SERVING)
	}
}

// Drain latches NOT_SERVING for good and pushes it to every watcher. It is
// synchronous and does not block: register it as the lifecycle manager's
// OnDrain listener so that gRPC health flips with the state.
func (b *GRPCBridge) Drain() {
	b.drainOnce.Do(func() {
		b.hs.Shutdown()
		close(b.drained)
	})
}

// Close drains the bridge and ends every Watch stream, so that the gRPC
// server's GracefulStop does not wait for watchers; Watch calls made after
// Close fail at once with UNAVAILABLE. Call it right before GracefulStop,
// once load balancers have seen NOT_SERVING.
func (b *GRPCBridge) Close() {
	b.Drain()
	b.close()
}

func (b *GRPCBridge) set(s healthpb.HealthCheckResponse_ServingStatus) {
	// SetServingStatus is a no-op once Shutdown has latched the server.
	b.hs.SetServingStatus(b.service, s)
	b.hs.SetServingStatus("", s)
}

// Check implements grpc.health.v1.Health/Check.
func (b *GRPCBridge) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return b.hs.Check(ctx, req)
}

// List implements grpc.health.v1.Health/List.
func (b *GRPCBridge) List(ctx context.Context, req *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	return b.hs.List(ctx, req)
}

// Watch implements grpc.health.v1.Health/Watch; the stream ends at
// [GRPCBridge.Close].
func (b *GRPCBridge) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	if b.closing.Err() != nil {
		// No message first: grpc-go clients then back off before retrying
		// instead of re-watching in a tight loop until GOAWAY arrives.
		return status.Error(codes.Unavailable, "readiness: server stopping")
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stop := context.AfterFunc(b.closing, cancel)
	defer stop()
	return b.hs.Watch(req, watchStream{stream, ctx})
}

// watchStream replaces a Watch stream's context, which health.Server selects
// on to end the stream.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (s watchStream) Context() context.Context { return s.ctx }
