package lifecycle

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	draining prometheus.Gauge
	duration prometheus.Gauge
	outcomes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
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
	if reg != nil {
		reg.MustRegister(mt.draining, mt.duration, mt.outcomes)
	}
	return mt
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
