package harness

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Percentiles summarises durations.
type Percentiles struct {
	N             int
	P50, P99, Max time.Duration
}

// PercentilesOf returns the nearest-rank p50, p99 and max of ds.
func PercentilesOf(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(i, 0)]
	}
	return Percentiles{N: len(s), P50: rank(0.50), P99: rank(0.99), Max: s[len(s)-1]}
}

// String is "p50 / p99 / max" rounded to the millisecond, or "n/a".
func (p Percentiles) String() string {
	if p.N == 0 {
		return "n/a"
	}
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return fmt.Sprintf("%s / %s / %s", r(p.P50), r(p.P99), r(p.Max))
}
