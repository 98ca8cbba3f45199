package draintrace_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/draintrace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder returns a tracer whose ended spans the recorder keeps.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// byName indexes spans by name.
func byName(spans []sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	m := make(map[string]sdktrace.ReadOnlySpan, len(spans))
	for _, s := range spans {
		m[s.Name()] = s
	}
	return m
}

// A real drain: phases in order, a failed hook, a hook cut off by the
// deadline and one skipped after it; each span sits where its hook ran.
func TestRecordDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp, rec := recorder(t)
		sleep := func(d time.Duration) func(context.Context) error {
			return func(ctx context.Context) error {
				select {
				case <-time.After(d):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		hooks := []drain.Hook{
			{Name: "http.stop_intake", Phase: drain.StopIntake, Run: sleep(10 * time.Millisecond)},
			{Name: "http.wait", Phase: drain.WaitInFlight, Run: sleep(200 * time.Millisecond)},
			{Name: "flush", Phase: drain.Flush, Run: func(context.Context) error { return errors.New("disk full") }},
			{Name: "release", Phase: drain.Release, Run: sleep(time.Hour)},
			{Name: "close", Phase: drain.Close, Run: sleep(0)},
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r := drain.Run(ctx, "signal: terminated", hooks)
		draintrace.Record(context.Background(), tp.Tracer("test"), r)

		spans := byName(rec.Ended())
		require.Len(t, spans, 11, "the drain, 5 phases, 5 hooks")
		root := spans["drain"]
		assert.Equal(t, r.Start, root.StartTime())
		assert.Equal(t, r.Start.Add(r.Duration), root.EndTime())
		assert.Equal(t, codes.Error, root.Status().Code, "a hook failed")
		assert.Contains(t, root.Attributes(), attrString("drain.reason", "signal: terminated"))

		for _, tt := range []struct {
			hook, phase string
			want        time.Duration
			status      codes.Code
		}{
			{"http.stop_intake", "drain.stop_intake", 10 * time.Millisecond, codes.Unset},
			{"http.wait", "drain.wait_in_flight", 200 * time.Millisecond, codes.Unset},
			{"flush", "drain.flush", 0, codes.Error},
			{"release", "drain.release", 790 * time.Millisecond, codes.Error},
		} {
			h, p := spans["drain.hook "+tt.hook], spans[tt.phase]
			require.NotNil(t, h, tt.hook)
			require.NotNil(t, p, tt.phase)
			assert.Equal(t, p.SpanContext().SpanID(), h.Parent().SpanID(), "%s is under %s", tt.hook, tt.phase)
			assert.Equal(t, root.SpanContext().SpanID(), p.Parent().SpanID(), "%s is under the drain", tt.phase)
			assert.Equal(t, tt.want, h.EndTime().Sub(h.StartTime()), tt.hook)
			assert.Equal(t, tt.status, h.Status().Code, tt.hook)
			assert.Equal(t, tt.status, p.Status().Code, tt.phase)
		}
		assert.Contains(t, spans["drain.hook flush"].Status().Description, "disk full")
		assert.False(t, spans["drain.stop_intake"].EndTime().After(spans["drain.wait_in_flight"].StartTime()), "phases in order")

		closed := spans["drain.hook close"]
		assert.Contains(t, closed.Attributes(), attrString("drain.hook.outcome", string(drain.Skipped)))
		assert.Equal(t, closed.StartTime(), closed.EndTime(), "a skipped hook has an empty span")
		assert.Equal(t, spans["drain.release"].EndTime(), closed.StartTime(), "placed where the drain stopped")
	})
}

// The spans are children of the span in ctx.
func TestRecordUnderParent(t *testing.T) {
	tp, rec := recorder(t)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "shutdown")
	r := drain.Run(context.Background(), "test", []drain.Hook{{Name: "h", Phase: drain.Flush, Run: func(context.Context) error { return nil }}})
	draintrace.Record(ctx, tp.Tracer("test"), r)
	parent.End()
	spans := byName(rec.Ended())
	assert.Equal(t, spans["shutdown"].SpanContext().SpanID(), spans["drain"].Parent().SpanID())
	assert.Equal(t, codes.Unset, spans["drain"].Status().Code, "every hook ended OK")
}

func attrString(k, v string) attribute.KeyValue { return attribute.String(k, v) }
