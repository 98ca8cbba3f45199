package grpchealth

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/drainkit/drainkit/readiness"
)

// DefaultTimeout is the timeout of [Check]: the budget of one downstream
// gRPC health call, well inside a whole ready evaluation.
const DefaultTimeout = 300 * time.Millisecond

// Check checks a downstream service's grpc.health.v1 status for service:
// anything but SERVING fails. It is informational: a tier's readiness
// follows its own ability to serve, never a downstream tier's readiness,
// which a dependency all its replicas share takes down at once (every
// caller would leave its balancer), and which one draining replica of a
// balanced conn fails every other probe. To gate on reaching the
// downstream, check the connection's state instead. Named after service
// (or "grpc" for service ""), with [DefaultTimeout]; a plain
// [readiness.Check], so a caller may override any field before Add.
func Check(conn grpc.ClientConnInterface, service string) readiness.Check {
	name := service
	if name == "" {
		name = "grpc"
	}
	client := healthpb.NewHealthClient(conn)
	return readiness.Check{Name: name, Tier: readiness.Informational, Timeout: DefaultTimeout,
		Probe: func(ctx context.Context) error {
			resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
			if err != nil {
				return err
			}
			if resp.Status != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("status %s", resp.Status)
			}
			return nil
		}}
}
