// Package grpcdrain drains a grpc-go server with package drain: it counts
// RPCs in a [drain.Tracker], refuses new ones once intake closes, and
// supplies the hooks that stop the server. It is apart so that a service
// that drains only HTTP servers does not build grpc-go.
//
// # Counting RPCs
//
// Build the server with [ServerOptions]:
//
//	srv := grpc.NewServer(append(grpcdrain.ServerOptions(tracker), yourOptions...)...)
//
// An RPC then counts until its answer has been written, not merely until
// its handler returned, so a drain that stops the server at zero cuts no
// answer off. grpc.health.v1 is not counted: a Watch stream lives as long
// as its client, and health must answer NOT_SERVING through the drain.
// Watch streams end when intake closes instead. A peer that forwards an
// RPC to this instance marks it with [drain.ForwardedHeader] in its
// metadata, so that it is tracked but no arrival, as over HTTP.
//
// # Refusing RPCs
//
// After [drain.Tracker.CloseIntake] a new RPC gets [Refused]: UNAVAILABLE
// with a RetryInfo detail, which [IsRefused] recognises. A bare UNAVAILABLE
// may also mean a connection broke after the server processed the call;
// the detail says the server did nothing with it, so a client may retry it
// anywhere.
//
// # Long-lived streams and stopping
//
// Given a [drain.Streams], [ServerOptions] registers server-streaming RPCs
// with it rather than counting them, to be closed paced. [Hooks] begins
// GracefulStop, closes intake once the RPCs that raced its GOAWAY have had
// time to arrive, waits for the RPCs in flight and for GracefulStop, and
// Stops the server at the deadline or when the drain is cut short.
package grpcdrain
