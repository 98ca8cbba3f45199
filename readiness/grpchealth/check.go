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
// anything but SERVING fails. The check is gating, named after service (or
// "grpc" for the whole server, service ""), with [DefaultTimeout]; it is a
// plain [readiness.Check], so a caller overrides what it needs before Add.
func Check(conn grpc.ClientConnInterface, service string) readiness.Check {
	name := service
	if name == "" {
		name = "grpc"
	}
	client := healthpb.NewHealthClient(conn)
	return readiness.Check{Name: name, Tier: readiness.Gating, Timeout: DefaultTimeout,
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
