package lifecycle

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	draining prometheus.Gauge
	duration prometheus.Gauge
	outcomes *prometheus.CounterVec
}

// newMetrics makes the manager's metrics and registers them with reg, all
// or none: a name reg already holds is an error naming it.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	mt := &metrics{
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "service_draining",
			Help: "1 once the process has flipped to Draining (until it exits), else 0.",
		}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "service_shutdown_duration_ms",
			Help: "Milliseconds from the stop request to the end of the drain.",
		}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drain_hook_outcomes_total",
			Help: "Drain hooks by phase and outcome (ok, failed, timeout, canceled, skipped, panic).",
		}, []string{"phase", "outcome"}),
	}
	if reg == nil {
		return mt, nil
	}
	collectors := []struct {
		name string
		c    prometheus.Collector
	}{
		{"service_draining", mt.draining},
		{"service_shutdown_duration_ms", mt.duration},
		{"drain_hook_outcomes_total", mt.outcomes},
	}
	for i, c := range collectors {
		if err := reg.Register(c.c); err != nil {
			for _, done := range collectors[:i] {
				reg.Unregister(done.c)
			}
			return nil, configError{fmt.Errorf("lifecycle: Registerer: metric %q: %w", c.name, err)}
		}
	}
	return mt, nil
}

func (mt *metrics) transition(t Transition) {
	if t.To == Draining {
		mt.draining.Set(1)
	}
}

func (mt *metrics) drained(r *Report) {
	mt.duration.Set(msOf(r.Duration))
	for _, h := range r.Hooks {
		mt.outcomes.WithLabelValues(string(h.Phase), string(h.Outcome)).Inc()
	}
}
