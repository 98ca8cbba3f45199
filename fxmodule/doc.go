// Package fxmodule wires drainkit into go.uber.org/fx.
//
// # Usage
//
//	func main() {
//		os.Exit(fxmodule.Run(
//			fxmodule.Module, fxmodule.FromEnv,
//			fx.Provide(fxmodule.AsHook(newSnapshotFlusher)),
//			fx.Provide(fxmodule.AsCheck(newDatabaseCheck)),
//			fx.Invoke(startServers),
//		))
//	}
//
// [Module] provides the *lifecycle.Manager, its *drain.Tracker and a
// *readiness.Registry; drain hooks and readiness checks join through
// [AsHook] and [AsCheck]. Settings are the Config structs of the
// wired packages, supplied to the graph: there are no functional options.
// Packages fxmodule/fxlease (leases) and fxmodule/fxgrpc (gRPC) are apart
// so that an HTTP service links neither go-redis nor grpc-go.
//
// # Running
//
// [Run] is the one supported way to run an app that includes Module
// (otherwise [ErrNotRun]): fx alone would mark the process ready too early,
// drain after OnStop hooks had closed what the drain needs, and swallow the
// second signal. Run drains before fx's OnStop hooks, gives them fx's
// StopTimeout after the drain, and returns the exit code. docs/fxmodule.md has the
// order, the budgets and the exit codes.
package fxmodule
