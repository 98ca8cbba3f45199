package drain

import "net/http"

// RetryAfter is the Retry-After value, in seconds, sent with the 503 that
// refuses a request after CloseIntake: long enough for a load balancer to
// have another backend ready, short enough not to stall a client.
const RetryAfter = "1"

// Middleware wraps next so that each request is counted in flight. After
// CloseIntake a new request is refused with 503, Retry-After and
// Connection: close, before next sees it, so a client or load balancer may
// safely retry it elsewhere.
func (t *Tracker) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !t.Begin() {
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
