package readiness

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainkit/drainkit/internal/metricreg"
)

// metrics are updated when an evaluation or a transition happens; a scrape
// only reads them and never runs a check.
type metrics struct {
	readyStatus prometheus.Gauge
	liveStatus  prometheus.Gauge
	duration    *prometheus.HistogramVec
	failures    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		readyStatus: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "health_ready_status",
			Help: "1 when the last ready probe answered ok or degraded, 0 when it failed.",
		}),
		liveStatus: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "health_live_status",
			Help: "1 when the last live probe answered ok, 0 when it failed.",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "health_check_duration_ms",
			Help:    "How long each readiness check took, in milliseconds.",
			Buckets: []float64{1, 2, 5, 10, 25, 50, 100, 200, 300, 500, 1000},
		}, []string{"check"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "health_dependency_failures_total",
			Help: "Failed readiness check results, per evaluation.",
		}, []string{"check", "tier"}),
	}
	err := metricreg.Register(reg, "readiness: Config.Registerer",
		metricreg.Named{Name: "health_ready_status", Collector: m.readyStatus},
		metricreg.Named{Name: "health_live_status", Collector: m.liveStatus},
		metricreg.Named{Name: "health_check_duration_ms", Collector: m.duration},
		metricreg.Named{Name: "health_dependency_failures_total", Collector: m.failures})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// addCheck creates the check's series so dashboards show zero, not nothing.
func (m *metrics) addCheck(c Check) {
	m.failures.WithLabelValues(c.Name, c.Tier.String())
}

func (m *metrics) observe(ev *evaluation) {
	for _, res := range ev.results {
		m.duration.WithLabelValues(res.name).Observe(float64(res.duration.Microseconds()) / 1000)
		if res.err != nil {
			m.failures.WithLabelValues(res.name, res.tier.String()).Inc()
		}
	}
}
