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

// New refuses a registerer that already holds a metric of the manager's
// with an error naming it, not a panic, and leaves none of its own behind.
func TestNewRefusesMetricsAlreadyRegistered(t *testing.T) {
	cfg := lifecycle.Config{NodeID: "n1", Logger: slog.New(slog.DiscardHandler)}
	t.Run("a second manager on one registerer", func(t *testing.T) {
		cfg.Registerer = prometheus.NewRegistry()
		_, err := lifecycle.New(cfg)
		require.NoError(t, err)
		m, err := lifecycle.New(cfg)
		if m != nil || err == nil {
			t.Fatalf("second New: got (%v, %v); want an error", m, err)
		}
		assert.ErrorIs(t, err, lifecycle.ErrConfig, "fxmodule.Run exits 78 on it")
		assert.ErrorAs(t, err, new(prometheus.AlreadyRegisteredError))
		assert.EqualError(t, err, `lifecycle: Registerer: metric "service_draining": duplicate metrics collector registration attempted`)
	})
	t.Run("another collector of the last metric's name", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		cfg.Registerer = reg
		taken := prometheus.NewGauge(prometheus.GaugeOpts{Name: "drain_hook_outcomes_total", Help: "someone else's"})
		require.NoError(t, reg.Register(taken))
		m, err := lifecycle.New(cfg)
		if m != nil || err == nil {
			t.Fatalf("New: got (%v, %v); want an error", m, err)
		}
		assert.ErrorIs(t, err, lifecycle.ErrConfig)
		assert.ErrorContains(t, err, `lifecycle: Registerer: metric "drain_hook_outcomes_total": `)
		families, err := reg.Gather()
		require.NoError(t, err)
		var names []string
		for _, f := range families {
			names = append(names, f.GetName())
		}
		assert.Equal(t, []string{"drain_hook_outcomes_total"}, names, "the failed New left a metric of its own registered")
	})
}
