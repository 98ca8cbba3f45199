// Package lifecycle owns a process's state, starting → running → draining
// → stopped, and turns a SIGTERM into an orderly drain.
//
// # Shutdown
//
// [Manager.Shutdown] says, in order, what happens from the first signal to
// the exit code, and shutdown.go holds that code in the same order;
// docs/shutdown.md gives the reasons. Each outcome has its own exit code:
// [ExitClean], [ExitHookFailed], [ExitDeadline], [ExitForced],
// [ExitStartFailed], [ExitConfig].
//
// # Configuration
//
// [ConfigFromEnv] is the one place environment variables are read:
// SERVICE_NAME, NODE_ID, DRAIN_TIMEOUT, DRAIN_DELAY, DRAIN_QUIET_WINDOW,
// DRAIN_DELAY_FLOOR and HEALTH_READY_TIMEOUT. A bad value is an error that
// names the variable and the value; nothing falls back silently. Every
// setting is a field of [Config], the logger and the metrics registerer
// included: there are no functional options. [New] refuses a field that
// cannot work, and a registerer that already holds the manager's metrics,
// with an error naming the field and the value.
//
// # Running
//
// [Manager.Run] is the whole life of a process: it handles the signals,
// runs the [Manager.OnStart] steps, marks the process Running, waits for a
// signal (or for its context to end), drains, and returns the [Report]
// whose ExitCode goes to os.Exit. [Manager.Shutdown] is the drain alone,
// for a framework that must drain from inside its own stop.
//
// # Observability
//
// One log line per transition (service node_id old_status new_status
// reason duration_ms); one per phase (phase hooks elapsed_ms) as it begins
// ("drain phase"), as a cut-short drain skips it ("drain phase skipped")
// and as the work after the drain adds to it ("after-drain hooks"), so the
// lines' hooks add up to the report's; and a last line with the [Report] as
// one JSON object, as JSON even under slog's built-in text handler (a
// handler you set is used as it is). Metrics: service_draining,
// service_shutdown_duration_ms and drain_hook_outcomes_total.
package lifecycle
