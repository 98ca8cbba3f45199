package draintrace_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/draintrace"
	"github.com/drainkit/drainkit/lifecycle"
)

// The drain of a lifecycle.Manager as a trace: the report comes with the
// transition to Stopped, before the process closes its tracer provider.
// Under fx, register the listener in an fx.Invoke that takes the
// *lifecycle.Manager.
func ExampleRecord() {
	rec := tracetest.NewSpanRecorder() // in production: an exporter's batch processor
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	m, _ := lifecycle.New(lifecycle.Config{Service: "svc", NodeID: "n1",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	m.OnTransition(func(t lifecycle.Transition) {
		if t.Report != nil {
			draintrace.Record(context.Background(), tp.Tracer("drainkit"), t.Report)
		}
	})
	_ = m.AddHook(drain.Hook{Name: "snapshots", Phase: drain.Flush, Run: func(context.Context) error { return nil }})
	m.Shutdown(context.Background(), "signal: terminated")

	for _, s := range rec.Ended() {
		fmt.Println(s.Name())
	}
	// Output:
	// drain.hook snapshots
	// drain.flush
	// drain
}
