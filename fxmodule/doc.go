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
// *readiness.Registry; drain hooks and readiness checks are contributed
// through value groups with [AsHook], [AsHooks] and [AsCheck].
// Package fxmodule/fxlease adds a *lease.Manager for a
// redis.UniversalClient and fxmodule/fxgrpc serves gRPC, each in a package
// of its own so that an HTTP service links neither go-redis nor grpc-go.
// Settings are the Config structs of the wired packages (lifecycle.Config,
// lease.Config) supplied to the graph, as everywhere in drainkit: there
// are no functional options.
//
// # Ordering
//
// [Run] is the one supported way to run an app that includes Module;
// Module refuses to start otherwise ([ErrNotRun]), because fx alone would
// mark the process ready before later OnStart hooks had returned and would
// drain after some OnStop hooks had closed what the drain needs. Run marks
// the process Running once every OnStart hook returned, and drains before
// fx runs any OnStop hook: readiness flips, in-flight work finishes and
// leases are handed over while the Redis client and the database are still
// open. fx's OnStop hooks then run under a fresh budget (fx's StopTimeout
// less DRAIN_TIMEOUT), also after a forced drain or one that ran out of
// time, and the drain report lists each one's outcome (phase close,
// "fx.OnStop <function>").
//
// # Timeouts and signals
//
// fx swallows a second signal, gives all OnStop hooks one StopTimeout (15 s
// by default) and rolls back a start that outlasted StartTimeout with a
// context that has ended, so that nothing is stopped. [Run] splits
// StopTimeout between the drain (DRAIN_TIMEOUT) and the OnStop hooks: an
// app that sets no fx.StopTimeout gets DRAIN_TIMEOUT + [StopMargin], so
// raising DRAIN_TIMEOUT needs no other change, and one that sets a
// StopTimeout leaving the OnStop hooks less than StopMargin is refused (give
// it to Run, not inside an fx.Module: fx refuses it there). It
// owns SIGTERM/SIGINT so the second signal still forces the drain and the
// third exits; and it enforces StartTimeout itself, aborting the start as
// a signal would, so the rollback still stops what had started. A process
// run by Run exits within StopTimeout of the first signal.
//
// # Configuration mistakes
//
// Run refuses a mistake found before the start with lifecycle.ExitConfig
// (78) and one log line saying what to change: a bad variable or
// lifecycle.Config, fxmodule.Module or the config forgotten, a type that
// nothing provides, an fx option fx refuses where it was given, a server
// or drain hook name taken twice, and any fx
// constructor's error that matches lifecycle.ErrConfig (wrap it, or give
// the error an Is method, to have a service's own settings refused so).
// Exit code 5 (lifecycle.ExitStartFailed) is left for a start that fails
// on the world: a port taken, a dependency unreachable.
package fxmodule
