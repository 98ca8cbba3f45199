// Package lifecycle owns a process's state, starting → running → draining
// → stopped, and turns a SIGTERM into an orderly drain.
//
// # The flip
//
// At the first SIGTERM or SIGINT the [Manager] moves to Draining in one
// place and runs its transition listeners synchronously, in registration
// order, before anything else: readiness reads [Manager.State] on its next
// probe and answers 503, and the lease gate closes. The process then keeps
// serving for the propagation delay (DRAIN_DELAY, optionally adaptive) so
// load balancers notice, and only then runs the drain hooks of package
// drain, phase by phase.
//
// # Deadline and escalation
//
// DRAIN_TIMEOUT is the whole budget from the first signal to exit, delay
// included. A second signal forces the drain (contexts cancelled, later
// phases skipped); a third exits at once. A signal during start-up
// cancels the start and drains what had started. Each outcome has its own
// exit code: [ExitClean], [ExitHookFailed], [ExitDeadline], [ExitForced],
// [ExitStartFailed], [ExitConfig].
//
// # Configuration
//
// [ConfigFromEnv] is the one place environment variables are read:
// SERVICE_NAME, NODE_ID, DRAIN_TIMEOUT, DRAIN_DELAY, DRAIN_QUIET_WINDOW,
// DRAIN_DELAY_FLOOR and HEALTH_READY_TIMEOUT. A bad value is an error that
// names the variable and the value; nothing falls back silently. In a
// [Config] built by hand, a zero budget means its default and a zero
// DrainDelay or QuietWindow means off (ConfigFromEnv defaults the delay to
// [DefaultDrainDelay]). Every setting is a field of Config, the logger and
// the metrics registerer included, as in each drainkit package: there are
// no functional options. [Config.Validate] (and [New], which calls it)
// refuses a value that cannot work with an error naming the field and the
// value.
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
// reason duration_ms), one per drain phase (phase hooks elapsed_ms), one
// per phase a cut-short drain skipped ("drain phase skipped"), one per
// phase of the work after the drain ("after-drain hooks": fx's OnStop
// hooks under fxmodule), so that the lines' hooks add up to the report's,
// and one final line with the [Report] as a JSON object. Under slog's own default handler, which prints text, that line
// is written as JSON to the same output so the report stays an object; a
// Logger or slog.SetDefault handler given is used as it is. Metrics:
// service_draining, service_shutdown_duration_ms and
// drain_hook_outcomes_total.
package lifecycle
