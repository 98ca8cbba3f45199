// Package drain runs the shutdown work of a service: hooks grouped in
// ordered phases under one deadline, and the in-flight tracking that tells
// when requests have finished.
//
// It knows nothing of signals or process states; package lifecycle decides
// when a drain starts and what its deadline is.
//
// # Phases
//
// A drain runs [StopIntake], [WaitInFlight], [Flush], [Release] and [Close]
// in that order. The hooks of one phase run concurrently; each gets a
// context that ends at min(its own Timeout, the drain deadline). A hook that
// fails, panics or overruns is reported and the drain goes on: the report,
// not an early return, says what went wrong.
//
// # Deadline
//
// [Run] never waits for a hook past that hook's context. A hook that
// ignores its context is abandoned: it keeps its goroutine, and the
// [Report] names it with the stack it was stuck in, so the process can exit
// on time and the operator can see why it had to.
//
// # In-flight work
//
// A [Tracker] counts requests, RPCs and batches; its zero value is ready to
// use. [Tracker.Middleware] counts HTTP requests and, after
// [Tracker.CloseIntake], refuses new ones with 503 and Retry-After, which
// clients may retry elsewhere. [Tracker.Wait] is woken the moment the count
// reaches zero. [HTTPHooks] drains an *http.Server with it, and closes what
// is left at the deadline.
//
// # Long-lived streams
//
// Server-Sent Events, WebSockets and other hijacked connections, and gRPC
// server streams last as long as their clients: http.Server.Shutdown
// neither waits for nor closes a hijacked connection, waits for an SSE
// handler until its deadline, and grpc-go's GracefulStop waits for every
// stream. Closing them all at the deadline sends every client to the
// other nodes in the same instant. A handler registers its stream with
// [Streams.Open]; the hooks of [Streams.Hooks] tell every stream at
// StopIntake, then, while the phases up to Release go on, close them one
// by one at open streams ÷ (time left − margin) per second, capped and
// jittered, and what is still open at once when only the margin is left.
//
// gRPC servers are counted and drained by package grpcdrain, which is apart
// so that a service that serves only HTTP does not build grpc-go.
//
// # Cut short
//
// A drain is cut short when its context is cancelled (forced) or its
// deadline passes. Later phases are then skipped, and [Run] calls every
// hook's Abort before it returns, so that work a hook began gracefully (a
// server's GracefulStop) is stopped hard even when the phase that was to
// finish it never ran. Hooks learn of the drain only through the context
// and Abort; nothing reaches them through context values, so they behave
// the same called by [Run] or by hand.
//
// # Conventions
//
//   - Zero values are ready where they can be: a zero [Tracker] counts
//     with intake open; zero fields of [StreamsConfig] mean the documented
//     defaults (the Default… constants).
//   - Bad input is refused where it enters, naming the field and the
//     value: [NewStreams] refuses a bad StreamsConfig, and [Run] reports a
//     hook with an empty Name, an unknown Phase, a negative Timeout or a
//     nil Run as [Failed] without running it.
//   - [Phase] and [Outcome] are strings whose values are the names that
//     reports, logs and metric labels show.
//   - Every blocking call takes a context first, and it bounds the wait;
//     a stream's context is returned by [Streams.Open] as
//     context.WithCancel returns one, with the function that ends it.
//   - [Run] returns a [Report], never an error: [Report.Err] joins one
//     error per hook that did not end [OK]. Errors of the package's own
//     start with its name ("drain: …").
package drain
