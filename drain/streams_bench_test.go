package drain_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drainkit/drainkit/drain"
)

// benchStreams is how many open streams the drain benchmarks close.
const benchStreams = 10_000

// BenchmarkStreamsDrain drains 10,000 open streams under a 3 s budget, in
// real time, three ways: paced by drain.Streams (margin 0.5 s, so at about
// 4,000/s, under the 10,000/s cap), paced with a cap the budget cannot meet
// (2,000/s: what does not fit is closed at once when the margin is
// reached), and the naive drain, which closes everything at the deadline.
// A closed stream is a client that reconnects to another node: the peak
// reconnect rate is the most closes in any 100 ms, per second.
//
//	go test -run='^$' -bench=StreamsDrain -benchtime=1x -count=3 ./drain
func BenchmarkStreamsDrain(b *testing.B) {
	const budget = 3 * time.Second
	paced := func(maxRate float64) func(ctx context.Context, open func(context.Context, *drain.Streams)) {
		return func(ctx context.Context, open func(context.Context, *drain.Streams)) {
			s, err := drain.NewStreams(drain.StreamsConfig{Name: "bench", MaxCloseRate: maxRate, Margin: 500 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			open(context.Background(), s)
			if err := drain.Run(ctx, "bench", s.Hooks()).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	naive := func(ctx context.Context, open func(context.Context, *drain.Streams)) {
		// Every stream's context ends with the drain's: what closing every
		// connection at the deadline (http.Server.Close, grpc Server.Stop) does.
		open(ctx, nil)
		<-ctx.Done()
	}
	for _, c := range []struct {
		name  string
		drain func(ctx context.Context, open func(context.Context, *drain.Streams))
	}{
		{"paced", paced(10_000)},
		{"capped-too-low", paced(2_000)},
		{"naive", naive},
	} {
		b.Run(c.name, func(b *testing.B) {
			var peak, took float64
			for b.Loop() {
				closes := make([]time.Time, benchStreams)
				var (
					next atomic.Int64
					wg   sync.WaitGroup
				)
				open := func(parent context.Context, s *drain.Streams) {
					for range benchStreams {
						ctx, end := parent, func() {}
						if s != nil {
							var ok bool
							if ctx, end, ok = s.Open(parent); !ok {
								b.Fatal("Open refused before the drain")
							}
						}
						wg.Go(func() {
							<-ctx.Done()
							closes[next.Add(1)-1] = time.Now()
							end()
						})
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), budget)
				start := time.Now()
				c.drain(ctx, open)
				wg.Wait()
				cancel()
				slices.SortFunc(closes, time.Time.Compare)
				peak = max(peak, peakRate(closes, 100*time.Millisecond))
				took = max(took, closes[len(closes)-1].Sub(start).Seconds())
			}
			b.ReportMetric(peak, "peak-reconnects/s")
			b.ReportMetric(took, "drain-s")
			b.ReportMetric(0, "ns/op") // one op is one 3 s drain: its time says nothing more
		})
	}
}

// peakRate returns the most of sorted times in any window, per second.
func peakRate(times []time.Time, window time.Duration) float64 {
	most, lo := 0, 0
	for hi := range times {
		for times[hi].Sub(times[lo]) >= window {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return float64(most) / window.Seconds()
}

// BenchmarkStreamMemory measures the heap an open stream costs in
// drain.Streams (its registration and context), beyond what the handler
// and its connection cost anyway.
//
//	go test -run='^$' -bench=StreamMemory -benchtime=1x -count=3 ./drain
func BenchmarkStreamMemory(b *testing.B) {
	var perStream float64
	for b.Loop() {
		s, err := drain.NewStreams(drain.StreamsConfig{Name: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		open := make([]func(), 0, benchStreams) // the handlers' references, not counted
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range benchStreams {
			_, end, _ := s.Open(context.Background())
			open = append(open, end)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perStream = float64(after.HeapAlloc-before.HeapAlloc) / benchStreams
		for _, end := range open {
			end()
		}
	}
	b.ReportMetric(perStream, "B/stream")
	b.ReportMetric(0, "ns/op")
}
