package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drainkit/drainkit/internal/harness"
)

// The gateway's retry counters are read from its /metrics as the
// Prometheus client serves them, one count per cause.
func TestScrapeGatewayRetriesReadsEachCause(t *testing.T) {
	reg := prometheus.NewRegistry()
	retries := prometheus.NewCounterVec(prometheus.CounterOpts{Name: gatewayRetriesMetric, Help: "h"}, []string{"after"})
	reg.MustRegister(retries, prometheus.NewCounter(prometheus.CounterOpts{Name: "other_total", Help: "h"}))
	retries.WithLabelValues("refused").Add(2)
	retries.WithLabelValues("unknown").Inc()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	n := &Node{Proc: &harness.Proc{Name: "gateway-1"}, Kind: "gateway", Admin: strings.TrimPrefix(srv.URL, "http://")}
	got, err := scrapeGatewayRetries(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	if want := "3 (after refused: 2, after unknown: 1)"; got.String() != want {
		t.Errorf("got %s; want %s", got, want)
	}
}
