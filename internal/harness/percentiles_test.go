package harness

import (
	"testing"
	"time"
)

func TestPercentilesOf(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p := PercentilesOf(ds)
	if p.P50 != 50*time.Millisecond || p.P99 != 99*time.Millisecond || p.Max != 100*time.Millisecond {
		t.Errorf("got %+v; want p50 50ms, p99 99ms, max 100ms", p)
	}
	if got := PercentilesOf(nil).String(); got != "n/a" {
		t.Errorf("got %q for no durations; want n/a", got)
	}
}
