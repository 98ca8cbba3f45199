package grpchealth

import "context"

// Update sets the serving status from one ready probe, as one turn of Run
// does, so that tests step the server instead of waiting for a tick.
func (s *Server) Update(ctx context.Context) { s.update(ctx) }
