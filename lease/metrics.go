package lease

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainkit/drainkit/internal/metricreg"
)

// metrics are one Manager's collectors; they count whether or not they are
// registered. The constant label route_prefix lets managers with their own
// keys share a Registerer, and refuses two that would share keys.
type metrics struct {
	held                                            prometheus.Gauge
	acquired, renewed, lost, released, leftToExpire prometheus.Counter
	checkFailures, heartbeatErrors                  prometheus.Counter
	renewDuration                                   prometheus.Histogram
	all                                             []metricreg.Named
}

func newMetrics() *metrics {
	m := &metrics{}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		m.all = append(m.all, metricreg.Named{Name: name, Collector: c})
		return c
	}
	m.held = prometheus.NewGauge(prometheus.GaugeOpts{Name: "room_leases_held", Help: "Room leases this process holds."})
	m.renewDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		// Milliseconds, like the service guide's health_*_ms metrics.
		Name:    "room_lease_renew_duration_ms",
		Help:    "Round-trip time of one session renewal (it renews every held lease), in milliseconds.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
	})
	m.all = append(m.all, metricreg.Named{Name: "room_leases_held", Collector: m.held},
		metricreg.Named{Name: "room_lease_renew_duration_ms", Collector: m.renewDuration})
	m.acquired = counter("room_lease_acquired_total", "Room leases acquired.")
	m.renewed = counter("room_lease_renewed_total", "Session renewals Redis confirmed (one renews every room held).")
	m.lost = counter("room_lease_lost_total", "Room leases lost with their session: ended in Redis or renewal overdue.")
	m.released = counter("room_lease_released_total", "Room leases released: their route deleted, or freed with the session's end.")
	m.leftToExpire = counter("room_lease_left_to_expire_total", "Room leases not released one by one at drain or stop, unflushed or their release failed (freed with the session).")
	m.checkFailures = counter("room_lease_check_failures_total", "Failed lease readiness probes.")
	m.heartbeatErrors = counter("room_node_heartbeat_failures_total", "Failed session renewals, and starts after a loss (room:node:{NODE}).")
	return m
}

// register registers all collectors on r (if set), labelled route_prefix, or none.
func (m *metrics) register(r prometheus.Registerer, routePrefix string) error {
	if r != nil {
		r = prometheus.WrapRegistererWith(prometheus.Labels{"route_prefix": routePrefix}, r)
	}
	err := metricreg.Register(r, fmt.Sprintf("lease: Config.Registerer (RoutePrefix %q)", routePrefix), m.all...)
	if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return fmt.Errorf("%w: another Manager with this RoutePrefix is registered: give each Manager its own RoutePrefix, and its own NodePrefix or Node (one session per node id)", err)
	}
	return err
}
