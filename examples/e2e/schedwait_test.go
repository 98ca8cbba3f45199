package e2e

import (
	"fmt"
	"math"
	"runtime/metrics"
	"slices"
	"sync"
	"time"

	"github.com/drainkit/drainkit/examples/internal/e2e"
)

// The test process's own latency: how long its goroutines (load clients,
// the reaper of each service) waited for a CPU. Latencies
// and exits the harness times include it, so every scenario reports it
// beside its table.
const schedLatencies = "/sched/latencies:seconds"

// schedFrom holds, per cluster, the histogram when the cluster started.
var schedFrom sync.Map // *e2e.Cluster → *metrics.Float64Histogram

func readSched() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(s)
	return s[0].Value.Float64Histogram()
}

// markSched notes the histogram as c starts.
func markSched(c *e2e.Cluster) { schedFrom.Store(c, readSched()) }

// schedWait describes the waits for a CPU since c started: the 99th and
// 99.9th percentiles and the longest, each as the upper bound of its
// histogram bucket.
func schedWait(c *e2e.Cluster) string {
	now := readSched()
	counts := slices.Clone(now.Counts)
	if v, ok := schedFrom.Load(c); ok {
		for i, n := range v.(*metrics.Float64Histogram).Counts {
			counts[i] -= n
		}
	}
	var total uint64
	for _, n := range counts {
		total += n
	}
	if total == 0 {
		return "no goroutine waits recorded"
	}
	upper := func(i int) time.Duration {
		b := now.Buckets[i+1]
		if math.IsInf(b, 1) {
			b = now.Buckets[i]
		}
		return time.Duration(b * float64(time.Second)).Round(time.Microsecond)
	}
	at := func(q float64) time.Duration {
		var acc uint64
		for i, n := range counts {
			if acc += n; float64(acc) >= q*float64(total) {
				return upper(i)
			}
		}
		return upper(len(counts) - 1)
	}
	most := 0
	for i, n := range counts {
		if n > 0 {
			most = i
		}
	}
	return fmt.Sprintf("the test process's goroutines waited for a CPU up to %s at the 99th percentile, %s at the 99.9th, %s at most (%s, %d waits since the cluster started)",
		at(0.99), at(0.999), upper(most), schedLatencies, total)
}
