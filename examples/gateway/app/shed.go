package app

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/drainkit/drainkit/drain"
)

// requestOverhead is what one held request costs beyond its headers and
// body: the serving goroutine's stack, the connection's buffers, the
// decoded command and the gRPC call. It is an estimate on the safe side,
// so that the byte cap bounds memory even for requests without a body.
const requestOverhead = 16 << 10

// minPendingBytes is the least MAX_PENDING_BYTES may be: one request of
// the largest body with no headers.
const minPendingBytes = requestOverhead + maxBodyLen

// pendingCost is what r is accounted while the gateway holds it.
func pendingCost(r *http.Request) int64 {
	n := int64(requestOverhead + len(r.URL.RawPath) + len(r.URL.Path) + len(r.URL.RawQuery))
	for k, vs := range r.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	switch {
	case r.ContentLength < 0 || r.ContentLength > maxBodyLen:
		n += maxBodyLen // read through http.MaxBytesReader, never more
	default:
		n += r.ContentLength
	}
	return n
}

// pending caps the API requests the gateway holds at once, in number and
// in accounted bytes. A request past either cap is shed: answered 503 with
// Retry-After at once, before its body is read, and counted. Waiting out a
// fault holds requests for up to their deadline; without the cap a flood
// during a fault would queue without bound.
type pending struct {
	count, bytes *semaphore.Weighted
	maxBytes     int64 // bytes' size: a request accounting for more takes it all
	shed         *prometheus.CounterVec
	held         prometheus.Gauge
}

func newPending(cfg Config, pr prometheus.Registerer) (*pending, error) {
	p := &pending{
		count:    semaphore.NewWeighted(int64(cfg.MaxPending)),
		bytes:    semaphore.NewWeighted(cfg.MaxPendingBytes),
		maxBytes: cfg.MaxPendingBytes,
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_requests_shed_total",
			Help: "API requests answered 503 at once because the pending cap (count or bytes) was reached.",
		}, []string{"cap"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gateway_requests_pending",
			Help: "API requests the gateway holds: forwarding, or waiting out a fault within their deadline.",
		}),
	}
	for _, c := range []prometheus.Collector{p.shed, p.held} {
		if err := pr.Register(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// middleware holds every request within the caps, or sheds it.
func (p *pending) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.count.TryAcquire(1) {
			p.reject(w, "count")
			return
		}
		defer p.count.Release(1)
		// Capped: a request costing more than the whole cap (large headers)
		// is admitted alone rather than shed every time as if for load.
		cost := min(pendingCost(r), p.maxBytes)
		if !p.bytes.TryAcquire(cost) {
			p.reject(w, "bytes")
			return
		}
		defer p.bytes.Release(cost)
		p.held.Inc()
		defer p.held.Dec()
		next.ServeHTTP(w, r)
	})
}

func (p *pending) reject(w http.ResponseWriter, limit string) {
	p.shed.WithLabelValues(limit).Inc()
	w.Header().Set("Retry-After", drain.RetryAfter)
	writeError(w, http.StatusServiceUnavailable, "gateway overloaded: too many pending requests ("+limit+" cap); nothing was forwarded")
}
