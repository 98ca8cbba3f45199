// Package draintrace exports a drain to OpenTelemetry: one span for the
// drain, one child per phase and one grandchild per hook, each with its
// outcome and duration, so a trace shows where a slow or failed shutdown
// spent its budget.
//
// The spans are made from a [drain.Report] once the drain is over, with
// the report's own timestamps, not while it runs: a drain records its
// hooks' times anyway, and a tracer that is slow or broken must not take
// part in the one path that has a deadline. Under package lifecycle the
// report arrives with the transition to Stopped (lifecycle.Transition's
// Report), before the process closes its clients, so a tracer provider
// shut down in an fx OnStop hook still exports the spans:
//
//	m.OnTransition(func(t lifecycle.Transition) {
//		if t.Report != nil {
//			draintrace.Record(context.Background(), tracer, t.Report)
//		}
//	})
//
// It is its own package so that the drain and lifecycle packages do not
// depend on OpenTelemetry.
package draintrace
