package lease

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are one Manager's collectors; they count whether or not they are
// registered. The constant label route_prefix lets managers with their own
// keys share a Registerer, and refuses two that would share keys.
type metrics struct {
	held                                            prometheus.Gauge
	acquired, renewed, lost, released, leftToExpire prometheus.Counter
	checkFailures, heartbeatErrors                  prometheus.Counter
	renewDuration                                   prometheus.Histogram
}

func newMetrics() *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return &metrics{
		held:            prometheus.NewGauge(prometheus.GaugeOpts{Name: "room_leases_held", Help: "Room leases this process holds."}),
		acquired:        counter("room_lease_acquired_total", "Room leases acquired."),
		renewed:         counter("room_lease_renewed_total", "Session renewals Redis confirmed (one renews every room held)."),
		lost:            counter("room_lease_lost_total", "Room leases lost with their session: ended in Redis or renewal overdue."),
		released:        counter("room_lease_released_total", "Room leases released: their route deleted, or freed with the session's end."),
		leftToExpire:    counter("room_lease_left_to_expire_total", "Room leases ended unflushed at drain or stop (freed with the session)."),
		checkFailures:   counter("room_lease_check_failures_total", "Failed lease readiness probes."),
		heartbeatErrors: counter("room_node_heartbeat_failures_total", "Failed session renewals (room:node:{NODE})."),
		renewDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			// Milliseconds, like the service guide's health_*_ms metrics.
			Name:    "room_lease_renew_duration_ms",
			Help:    "Round-trip time of one session renewal (it renews every held lease), in milliseconds.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
		}),
	}
}

// register registers all collectors on r (if set), labelled route_prefix, or none.
func (m *metrics) register(r prometheus.Registerer, routePrefix string) error {
	r = prometheus.WrapRegistererWith(prometheus.Labels{"route_prefix": routePrefix}, r) // a no-op for nil
	all := []prometheus.Collector{m.held, m.acquired, m.renewed, m.lost, m.released, m.leftToExpire,
		m.renewDuration, m.checkFailures, m.heartbeatErrors}
	for i, c := range all {
		if err := r.Register(c); err != nil {
			for _, d := range all[:i] {
				r.Unregister(d)
			}
			if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				return fmt.Errorf("another Manager with this RoutePrefix is registered: give each Manager its own RoutePrefix: %w", err)
			}
			return err
		}
	}
	return nil
}
