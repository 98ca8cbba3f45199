// Package drain runs the shutdown work of a service: hooks grouped in
// ordered phases under one deadline, and the in-flight tracking that tells
// when requests have finished. It knows nothing of signals or process
// states; package lifecycle decides when a drain starts and its deadline.
//
// # Phases
//
// A drain runs [StopIntake], [WaitInFlight], [Flush], [Release] and [Close]
// in that order. The hooks of one phase run concurrently; each gets a
// context that ends at min(its own Timeout, the drain deadline). A hook that
// fails, panics or overruns is reported and the drain goes on: [Run]
// returns a [Report], not an error.
//
// # Deadline
//
// [Run] never waits for a hook past that hook's context, and 20 ms for it
// to return. A hook that ignores its context is abandoned, and the report names it with the stack
// it was stuck in, so the process exits on time and the operator sees why.
// A drain cut short (forced, or out of time) skips the later phases and
// calls every hook's Abort, so that work begun gracefully is stopped hard.
// Hooks learn of the drain only through their context and Abort, so they
// behave the same called by Run or by hand.
//
// # In-flight work
//
// A [Tracker] counts requests, RPCs and batches; its zero value is ready to
// use. [Tracker.Middleware] counts HTTP requests and, after
// [Tracker.CloseIntake], refuses new ones with 503 and Retry-After.
// [Tracker.Wait] is woken the moment the count reaches zero. [HTTPHooks]
// drains an *http.Server with it, keeping its listener open until phase
// close. Package grpcdrain does the same for
// grpc-go, apart so that an HTTP service does not build grpc-go.
//
// # Long-lived streams
//
// Server-Sent Events, WebSockets and gRPC server streams last as long as
// their clients, and closing them all at the deadline sends every client
// to the other nodes in the same instant. [Streams] closes them paced over
// the drain instead; docs/streams.md has how.
package drain
