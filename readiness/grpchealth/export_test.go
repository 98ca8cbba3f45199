package grpchealth

import (
	"context"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Update sets the serving status from one ready probe, as one turn of Run
// does, so that tests step the server instead of waiting for a tick.
func (s *Server) Update(ctx context.Context) { s.update(ctx) }

// Status is the serving status the server answers for service, read
// without a connection (inside a synctest bubble, where none can be made).
func (s *Server) Status(ctx context.Context, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	resp, err := s.hs.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN, err
	}
	return resp.Status, nil
}

// MinPoll is the shortest interval Run polls the registry at.
const MinPoll = minPoll
