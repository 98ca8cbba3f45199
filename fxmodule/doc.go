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
// [LeaseModule] adds a *lease.Manager for a redis.UniversalClient.
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
// open. fx's OnStop hooks then run under a fresh budget of [StopMargin],
// also after a forced drain or one that ran out of time, and the drain
// report lists each one's outcome (phase close, "fx.OnStop <function>").
//
// # Timeouts and signals
//
// fx swallows a second signal and gives all OnStop hooks one StopTimeout
// (15 s by default). [Run] refuses to start when StopTimeout is shorter
// than DRAIN_TIMEOUT + [StopMargin] (set it with fx.StopTimeout, or
// [StopTimeoutFor], at the top level: fx refuses it inside a module), owns
// SIGTERM/SIGINT so the second signal still forces the drain and the third
// exits, and aborts a start that a signal interrupts. A process run by Run
// exits at most DRAIN_TIMEOUT + StopMargin after the first signal.
package fxmodule
