package drain

import "net/http"

// RetryAfter is the Retry-After value, in seconds, sent with the 503 that
// refuses a request after CloseIntake: long enough for a load balancer to
// have another backend ready, short enough not to stall a client.
const RetryAfter = "1"

// ForwardedHeader marks a request that another instance forwarded here
// because this one holds what it is for (lease.Manager.Place names the
// holder), with any non-empty value. Such requests follow the room, not
// the load balancers, until the hand-off moves it: Middleware tracks and
// refuses them like any other, but notes no arrival, so the drain
// report's advice on the propagation delay and the adaptive delay see only
// what the balancers send. The forwarder resends what is refused. The same
// key in gRPC metadata marks a forwarded RPC (package grpcdrain). It is
// trusted from anyone: remove it at your edge from clients' requests,
// whose arrivals it would hide.
const ForwardedHeader = "Drainkit-Forwarded"

// Middleware wraps next so that each request is counted in flight. After
// CloseIntake a new request is refused with 503, Retry-After and
// Connection: close, before next sees it, so a client or load balancer may
// safely retry it elsewhere. A request with [ForwardedHeader] is no arrival
// (see [Tracker.Arrivals]). A nil next panics, as http.Handle's does.
func (t *Tracker) Middleware(next http.Handler) http.Handler {
	if next == nil {
		panic("drain: Middleware: next is nil")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !t.begin(r.Header.Get(ForwardedHeader) == "") { // BeginForwarded when marked
			h := w.Header()
			h.Set("Connection", "close")
			h.Set("Retry-After", RetryAfter)
			http.Error(w, "draining: retry on another instance", http.StatusServiceUnavailable)
			return
		}
		defer t.End()
		next.ServeHTTP(w, r)
	})
}
