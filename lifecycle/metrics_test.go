package lifecycle_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/lifecycle"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := lifecycle.New(lifecycle.Config{NodeID: "n1", Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, m.AddHook(
		drain.Hook{Name: "ok", Phase: drain.Flush, Run: func(context.Context) error { return nil }},
		drain.Hook{Name: "bad", Phase: drain.Close, Run: func(context.Context) error { return errors.New("boom") }},
	))
	require.NoError(t, m.MarkRunning())
	const draining = `
# HELP service_draining 1 once the process has flipped to Draining (until it exits), else 0.
# TYPE service_draining gauge
service_draining %d
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(strings.Replace(draining, "%d", "0", 1)), "service_draining"))

	m.Shutdown(context.Background(), "test")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(strings.Replace(draining, "%d", "1", 1)), "service_draining"))
	const outcomes = `
# HELP drain_hook_outcomes_total Drain hooks by phase and outcome (ok, failed, timeout, canceled, skipped, panic).
# TYPE drain_hook_outcomes_total counter
drain_hook_outcomes_total{outcome="failed",phase="close"} 1
drain_hook_outcomes_total{outcome="ok",phase="flush"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(outcomes), "drain_hook_outcomes_total"))
	n, err := testutil.GatherAndCount(reg, "service_shutdown_duration_ms")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}
