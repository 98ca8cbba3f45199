// Package draintrace exports a drain to OpenTelemetry: one span for the
// drain, one child per phase and one grandchild per hook, each with its
// outcome and duration, so a trace shows where a slow or failed shutdown
// spent its budget.
//
// The spans are made from a [drain.Report] once the drain is over, with
// the report's own timestamps, so that a slow or broken tracer takes no
// part in the path that has a deadline. Under package lifecycle the report
// comes with the transition to Stopped, before fx's OnStop hooks, so a
// tracer provider shut down in one still exports the spans:
//
//	m.OnTransition(func(t lifecycle.Transition) {
//		if t.Report != nil {
//			draintrace.Record(context.Background(), tracer, t.Report)
//		}
//	})
//
// It is apart so that the drain and lifecycle packages do not depend on
// OpenTelemetry.
package draintrace
