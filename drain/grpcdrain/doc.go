// Package grpcdrain drains a grpc-go server with package drain: it counts
// RPCs in a [drain.Tracker], refuses new ones once intake closes, and
// supplies the hooks that stop the server.
//
// It is a package of its own so that a service that drains only HTTP
// servers does not build grpc-go.
//
// # Counting RPCs
//
// Build the server with [ServerOptions]:
//
//	srv := grpc.NewServer(append(grpcdrain.ServerOptions(tracker), yourOptions...)...)
//
// An RPC then counts from its arrival until its answer has been written,
// not merely until its handler returned, so a drain that stops the server
// when the count reaches zero cannot cut an answer off. grpc.health.v1 is
// not counted: a Watch stream lives as long as its client and would hold
// every drain to its deadline, and health checks must keep answering
// (NOT_SERVING) while the process drains. Watch streams are ended instead
// when intake closes.
//
// # Refusing RPCs
//
// After [drain.Tracker.CloseIntake] a new RPC is refused with [Refused]:
// UNAVAILABLE with a RetryInfo detail, which [IsRefused] recognises. A bare
// UNAVAILABLE may also mean a connection broke after the server processed
// the call; the detail says the server did nothing with it, so a client
// may retry it anywhere. Services use [Refused] for their own "not
// processed, retry" answers too, so clients can rely on the detail.
//
// # Long-lived streams
//
// Given a [drain.Streams], [ServerOptions] registers server-streaming RPCs
// with it rather than counting them, and its hooks close them paced over
// the drain budget while the later phases go on; each ends with [Refused],
// so its client reconnects elsewhere from its position.
//
// # Stopping the server
//
// [Hooks] returns the StopIntake, WaitInFlight and Release hooks that close
// intake and begin GracefulStop, wait for the RPCs in flight, wait for
// GracefulStop, and Stop the server at the deadline or when the drain is
// cut short.
package grpcdrain
