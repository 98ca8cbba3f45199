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
// [Run] drains before fx runs any OnStop hook: readiness flips, in-flight
// work finishes and leases are handed over while the Redis client and the
// database are still open; fx then stops them. Under a plain app.Run (or
// fxtest) the drain runs in Module's OnStop hook instead, which fx runs
// before the OnStop hooks of everything a contributed hook depends on.
//
// # Timeouts and signals
//
// fx gives all OnStop hooks one StopTimeout (15 s by default) and swallows
// a second signal. [Run] refuses to start when StopTimeout is shorter than
// DRAIN_TIMEOUT (set it with fx.StopTimeout at the top level: fx refuses it
// inside a module), owns SIGTERM/SIGINT so the second signal still forces
// the drain and the third exits, and aborts a start that a signal
// interrupts.
package fxmodule
