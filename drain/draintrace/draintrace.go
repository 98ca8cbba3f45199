package draintrace

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/drainkit/drainkit/drain"
)

// Record makes the spans of r with tracer, as children of the span in ctx
// if there is one: "drain" (reason, forced, deadline exceeded) covering
// r.Start to r.Start+r.Duration; under it "drain.<phase>" for every phase
// that has a hook, spanning its hooks; under each phase "drain.hook
// <name>" with the hook's outcome, duration and error. A hook that did not
// end OK marks its span, its phase's and the drain's as errors. A hook that
// never ran (skipped) gets an empty span at the end of what ran before it.
func Record(ctx context.Context, tracer trace.Tracer, r *drain.Report) {
	end := r.Start.Add(r.Duration)
	ctx, root := tracer.Start(ctx, "drain", trace.WithTimestamp(r.Start), trace.WithAttributes(
		attribute.String("drain.reason", r.Reason),
		attribute.Bool("drain.forced", r.Forced),
		attribute.Bool("drain.deadline_exceeded", r.DeadlineExceeded),
	))
	if err := r.Err(); err != nil {
		root.SetStatus(codes.Error, err.Error())
	}
	last := r.Start // where a hook that never ran is placed
	for _, hooks := range byPhase(r.Hooks) {
		from, to := bounds(hooks, last)
		pctx, phase := tracer.Start(ctx, "drain."+string(hooks[0].Phase), trace.WithTimestamp(from))
		for _, h := range hooks {
			start := h.Start
			if start.IsZero() {
				start = from
			}
			_, span := tracer.Start(pctx, "drain.hook "+h.Name, trace.WithTimestamp(start), trace.WithAttributes(
				attribute.String("drain.hook.phase", string(h.Phase)),
				attribute.String("drain.hook.outcome", string(h.Outcome)),
				attribute.Float64("drain.hook.duration_ms", float64(h.Duration)/float64(time.Millisecond)),
			))
			if h.Outcome != drain.OK {
				span.SetStatus(codes.Error, string(h.Outcome)+": "+h.Error)
				phase.SetStatus(codes.Error, "hook "+h.Name+": "+string(h.Outcome))
			}
			span.End(trace.WithTimestamp(start.Add(h.Duration)))
		}
		phase.End(trace.WithTimestamp(to))
		last = to
	}
	root.End(trace.WithTimestamp(end))
}

// byPhase groups consecutive results of one phase, keeping report order.
func byPhase(hs []drain.HookResult) [][]drain.HookResult {
	var groups [][]drain.HookResult
	for i, h := range hs {
		if i == 0 || h.Phase != hs[i-1].Phase {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], h)
	}
	return groups
}

// bounds is the time span of hooks that ran, or an empty span at last if
// none did.
func bounds(hooks []drain.HookResult, last time.Time) (from, to time.Time) {
	for _, h := range hooks {
		if h.Start.IsZero() {
			continue
		}
		if from.IsZero() || h.Start.Before(from) {
			from = h.Start
		}
		if e := h.Start.Add(h.Duration); e.After(to) {
			to = e
		}
	}
	if from.IsZero() {
		return last, last
	}
	return from, to
}
