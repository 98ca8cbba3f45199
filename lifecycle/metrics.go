package lifecycle

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainkit/drainkit/internal/metricreg"
)

type metrics struct {
	draining    prometheus.Gauge
	duration    prometheus.Gauge
	outcomes    *prometheus.CounterVec
	lastArrival prometheus.Histogram
	refused     prometheus.Counter
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
		lastArrival: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "service_drain_last_arrival_after_flip_ms",
			Help:    "Milliseconds from the flip to the last request or RPC that arrived during the drain (0 if none): the load balancers' propagation.",
			Buckets: prometheus.ExponentialBuckets(10, 2, 15), // 10 ms to 164 s
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "service_drain_refused_after_intake_total",
			Help: "Requests and RPCs that arrived after the drain's stop_intake and were refused: the propagation delay was too short.",
		}),
	}
	err := metricreg.Register(reg, "lifecycle: Registerer",
		metricreg.Named{Name: "service_draining", Collector: mt.draining},
		metricreg.Named{Name: "service_shutdown_duration_ms", Collector: mt.duration},
		metricreg.Named{Name: "drain_hook_outcomes_total", Collector: mt.outcomes},
		metricreg.Named{Name: "service_drain_last_arrival_after_flip_ms", Collector: mt.lastArrival},
		metricreg.Named{Name: "service_drain_refused_after_intake_total", Collector: mt.refused})
	if err != nil {
		return nil, err
	}
	return mt, nil
}

func (mt *metrics) transition(t Transition) {
	if t.To == Draining {
		mt.draining.Set(1)
	}
}

// drained records r; the arrivals only if the process was serving at
// the flip (a failed start has no load balancer to measure).
func (mt *metrics) drained(r *Report, wasRunning bool) {
	mt.duration.Set(msOf(r.Duration))
	if wasRunning {
		mt.lastArrival.Observe(msOf(r.LastArrivalAfterFlip))
	}
	mt.refused.Add(float64(r.RefusedAfterIntake))
	for _, h := range r.Hooks {
		mt.outcomes.WithLabelValues(string(h.Phase), string(h.Outcome)).Inc()
	}
}
