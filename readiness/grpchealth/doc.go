// Package grpchealth speaks grpc.health.v1 for a [readiness.Registry]: it
// serves the protocol in step with the registry, and checks a downstream
// service over it. It is a package of its own so that a service without
// gRPC does not link grpc-go through readiness.
//
// # Serving
//
// [Server] keeps a grpc-go health server in step for the registry's service
// name and "": UNKNOWN while starting, SERVING when ready, NOT_SERVING when
// not, and from [Server.Drain] on, latched, so that no evaluation racing the flip
// reports SERVING again. Wire it to a lifecycle manager m and a grpc.Server
// srv:
//
//	health, err := grpchealth.NewServer(reg)
//	if err != nil {
//		return err
//	}
//	health.Register(srv)
//	m.OnTransition(health.OnTransition) // SERVING from the flip to Running, NOT_SERVING at the drain's
//	go health.Run(ctx)                  // and in step with readiness between them
//	// at stop intake:
//	health.Close() // ends Watch streams
//	srv.GracefulStop()
//
// Close comes before GracefulStop because GracefulStop waits for every open
// stream, and a prober's Watch stream stays open until the prober goes away:
// left open, it would hold the server until the drain deadline.
// docs/readiness.md has the details.
//
// # Checking a downstream service
//
// [Check] is an informational [readiness.Check] that asks a downstream
// server for a service's status with [DefaultTimeout]: reported, never
// gated on, since a downstream tier's readiness is not this one's.
package grpchealth
