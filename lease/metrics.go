package lease

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are one Manager's collectors. They exist (and count) whether or
// not a Registerer was configured. Each carries the constant label
// route_prefix, the Manager's RoutePrefix: managers with their own keys
// can share a Registerer, and two that would share keys cannot.
type metrics struct {
	held            prometheus.Gauge
	acquired        prometheus.Counter
	renewed         prometheus.Counter
	lost            prometheus.Counter
	released        prometheus.Counter
	leftToExpire    prometheus.Counter
	renewDuration   prometheus.Histogram
	checkFailures   prometheus.Counter
	heartbeatErrors prometheus.Counter
}

func newMetrics(routePrefix string) *metrics {
	labels := prometheus.Labels{"route_prefix": routePrefix}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
	}
	return &metrics{
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "room_leases_held", Help: "Room leases this process holds.",
			ConstLabels: labels}),
		acquired:     counter("room_lease_acquired_total", "Room leases acquired."),
		renewed:      counter("room_lease_renewed_total", "Room lease renewals Redis confirmed."),
		lost:         counter("room_lease_lost_total", "Room leases lost: gone, stolen or renewal overdue."),
		released:     counter("room_lease_released_total", "Room leases released (deleted from Redis by us)."),
		leftToExpire: counter("room_lease_left_to_expire_total", "Room leases left to expire on drain or stop."),
		renewDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			// Milliseconds, like the health_*_ms and service_shutdown_duration_ms
			// metrics the service guide names, so one dashboard reads them alike.
			Name:        "room_lease_renew_duration_ms",
			Help:        "Round-trip time of one renewal tick (all held leases and the heartbeat), in milliseconds.",
			Buckets:     prometheus.ExponentialBuckets(0.5, 2, 14),
			ConstLabels: labels,
		}),
		checkFailures:   counter("room_lease_check_failures_total", "Failed lease readiness probes."),
		heartbeatErrors: counter("room_node_heartbeat_failures_total", "Failed node heartbeat writes."),
	}
}

// register registers every collector on r, or none: on the first failure
// it unregisters what it registered and reports the failure.
func (m *metrics) register(r prometheus.Registerer) error {
	if r == nil {
		return nil
	}
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{
		m.held, m.acquired, m.renewed, m.lost, m.released, m.leftToExpire,
		m.renewDuration, m.checkFailures, m.heartbeatErrors,
	} {
		if err := r.Register(c); err != nil {
			for _, d := range done {
				r.Unregister(d)
			}
			if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				return fmt.Errorf("another Manager with this RoutePrefix is registered: give each Manager its own RoutePrefix: %w", err)
			}
			return err
		}
		done = append(done, c)
	}
	return nil
}
