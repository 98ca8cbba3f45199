package lease

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/internal/redistest"
)

// benchManager starts a manager on a fresh server whose renewer never
// ticks during the benchmark (TTL 1h): the benchmark drives renewal.
func benchManager(b *testing.B) (*Manager, *redis.Client) {
	b.Helper()
	s := redistest.Start(b)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: 1, ContextTimeoutEnabled: true, PoolSize: 32})
	b.Cleanup(func() { _ = c.Close() })
	m, err := New(c, Config{Node: "bench", TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Stop(context.Background()) })
	return m, c
}

// acquireN acquires n rooms in pipelined batches of concurrent Acquires.
func acquireN(b *testing.B, m *Manager, n int) []*Lease {
	b.Helper()
	ls := make([]*Lease, n)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				l, err := m.Acquire(context.Background(), fmt.Sprintf("bench-%d", i))
				if err != nil {
					b.Error(err)
					return
				}
				ls[i] = l
			}
		}()
	}
	wg.Wait()
	return ls
}

// BenchmarkRenew renews N held leases per op: as one pipeline (what the
// renewer does each tick), one call per lease, and one call per lease from
// 16 goroutines.
func BenchmarkRenew(b *testing.B) {
	for _, n := range []int{100, 1_000, 10_000} {
		m, c := benchManager(b)
		ls := acquireN(b, m, n)
		ctx := context.Background()
		ttl := m.ttlArg.Milliseconds()
		renewOne := func(l *Lease) {
			if got, err := renewScript.Run(ctx, c, []string{l.key}, l.value, ttl).Int(); err != nil || got != renewOK {
				b.Fatalf("renew %s = %d, %v; want 1, nil", l, got, err)
			}
		}
		report := func(b *testing.B, roundTrips int) {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/lease")
			b.ReportMetric(float64(roundTrips), "round-trips/op")
		}
		b.Run(fmt.Sprintf("leases=%d/pipeline", n), func(b *testing.B) {
			for b.Loop() {
				if err := m.RenewAll(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if got := len(m.Held()); got != n {
				b.Fatalf("%d leases held after renewing; want %d", got, n)
			}
			report(b, 1)
		})
		b.Run(fmt.Sprintf("leases=%d/one-by-one", n), func(b *testing.B) {
			for b.Loop() {
				for _, l := range ls {
					renewOne(l)
				}
			}
			report(b, n)
		})
		b.Run(fmt.Sprintf("leases=%d/16-goroutines", n), func(b *testing.B) {
			for b.Loop() {
				var wg sync.WaitGroup
				for w := range 16 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := w; i < n; i += 16 {
							renewOne(ls[i])
						}
					}()
				}
				wg.Wait()
			}
			report(b, n)
		})
	}
}

// BenchmarkAcquireRelease measures acquire+release pairs on loopback.
func BenchmarkAcquireRelease(b *testing.B) {
	m, _ := benchManager(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		l, err := m.Acquire(ctx, fmt.Sprintf("ar-%d", i%64))
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkHeldLeaseMemory reports the heap a held lease costs the
// process (the Lease, its context, channel, strings and map entry).
func BenchmarkHeldLeaseMemory(b *testing.B) {
	m, _ := benchManager(b)
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	i := 0
	for b.Loop() {
		if _, err := m.Acquire(ctx, fmt.Sprintf("mem-%08d", i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := len(m.Held()); got != b.N {
		b.Fatalf("%d leases held; want %d", got, b.N)
	}
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "B/lease")
}
