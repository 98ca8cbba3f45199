package readiness_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// BenchmarkReadyHTTP compares a cached ready probe over real HTTP on
// loopback with an empty 200 handler in the same run (target: at least 95%
// of its requests per second, as BENCHMARKS.md has it).
func BenchmarkReadyHTTP(b *testing.B) {
	r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1",
		CacheTTL: time.Hour, Logger: (&logs{}).logger()}, newState(lifecycle.Running).State)
	require.NoError(b, err)
	defer r.Close(context.Background())
	for _, name := range []string{"db", "redis", "listener"} {
		require.NoError(b, r.Add(readiness.Check{Name: name, Probe: func(context.Context) error { return nil }}))
	}
	handlers := []struct {
		name string
		h    http.Handler
	}{
		{"empty", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })},
		{"ready", r.ReadyHandler()},
	}
	for _, hh := range handlers {
		b.Run(hh.name, func(b *testing.B) {
			srv := httptest.NewServer(hh.h)
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			defer client.CloseIdleConnections()
			get(b, client, srv.URL) // warm the cache
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					get(b, client, srv.URL)
				}
			})
		})
	}
}

// get is called from RunParallel's goroutines: it asserts, never requires.
func get(b *testing.B, c *http.Client, url string) {
	resp, err := c.Get(url)
	if !assert.NoError(b, err) {
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(b, http.StatusOK, resp.StatusCode, "status")
}

// BenchmarkStampede sends b.N probes from 1,000 goroutines at a 50 ms check
// with a 100 ms TTL, beside an empty handler under the same load. It reports
// check executions per window of TTL plus check duration (target: at most 1)
// and p99 latency in microseconds (target: within 1.1x of the empty
// handler's; on a loaded 2-core machine both are dominated by scheduling).
func BenchmarkStampede(b *testing.B) {
	const ttl, checkTime = 100 * time.Millisecond, 50 * time.Millisecond
	var runs atomic.Int64
	// Generous timeouts: 1,000 goroutines on 2 cores can starve a 50 ms check
	// past the 300 ms default, and a timed-out check answers 503; this
	// benchmark measures the stampede, not the machine's overload.
	r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1",
		CacheTTL: ttl, ReadyTimeout: 5 * time.Second, CheckTimeout: 5 * time.Second,
		Logger: (&logs{}).logger()}, newState(lifecycle.Running).State)
	require.NoError(b, err)
	defer r.Close(context.Background())
	require.NoError(b, r.Add(readiness.Check{Name: "slow", Probe: func(ctx context.Context) error {
		runs.Add(1)
		t := time.NewTimer(checkTime)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}))
	r.Ready(context.Background()) // the first evaluation waits; keep it out

	b.Run("empty", func(b *testing.B) {
		stampede(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	})
	b.Run("ready", func(b *testing.B) {
		runs.Store(0)
		elapsed := stampede(b, r.ReadyHandler())
		windows := float64(elapsed) / float64(ttl+checkTime)
		b.ReportMetric(float64(runs.Load())/max(windows, 1), "runs/window")
	})
}

// stampede serves b.N requests from 1,000 goroutines, reports their p99 and
// returns the elapsed time.
func stampede(b *testing.B, h http.Handler) time.Duration {
	const workers = 1000
	var next atomic.Int64
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz/ready", nil))
				lat[w] = append(lat[w], time.Since(t0))
				assert.Equal(b, http.StatusOK, rec.Code, "status")
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
	return elapsed
}
