package lease

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
)

// benchManager starts a manager on a fresh server whose renewer never
// ticks during the benchmark (TTL 1h): the benchmark drives renewal. The
// client has go-redis defaults but for the two settings the lease package
// requires (at most one retry, context deadlines honoured). It also
// returns a client with plain defaults, as a redislock user would create.
func benchManager(b *testing.B) (*Manager, *redis.Client, *redis.Client) {
	b.Helper()
	s := redistest.Start(b)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
	plain := redis.NewClient(&redis.Options{Addr: s.Addr})
	b.Cleanup(func() { _ = c.Close(); _ = plain.Close() })
	m, err := New(c, Config{Node: "bench", TTL: time.Hour})
	require.NoError(b, err)
	require.NoError(b, m.Start(context.Background()))
	b.Cleanup(func() { _ = m.Stop(context.Background()) })
	return m, c, plain
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
				if !assert.NoError(b, err) {
					return
				}
				ls[i] = l
			}
		}()
	}
	wg.Wait()
	return ls
}

// BenchmarkRenew runs one renewal round (the renewer's tick) with N
// leases held: one call whatever N, so its cost does not grow with N.
func BenchmarkRenew(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			m, _, _ := benchManager(b)
			acquireN(b, m, n)
			ctx := context.Background()
			for b.Loop() {
				require.NoError(b, m.tick(ctx))
			}
			require.Equal(b, n, len(m.snapshot()), "leases held after renewing")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/round")
		})
	}
}

// pairsPerOp acquire+release pairs make one op, so that a short run
// (-benchtime 3x) still measures a rate.
const pairsPerOp = 200

// BenchmarkAcquireRelease measures acquire+release pairs on loopback, and
// beside them a redislock-style lock (SET NX PX in a script,
// compare-and-DEL script, random token per obtain) on a client with plain
// go-redis defaults, as the yardstick.
func BenchmarkAcquireRelease(b *testing.B) {
	m, _, plain := benchManager(b)
	ctx := context.Background()
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N*pairsPerOp)/b.Elapsed().Seconds(), "pairs/s")
	}
	b.Run("lease", func(b *testing.B) {
		for b.Loop() {
			for i := range pairsPerOp {
				l, err := m.Acquire(ctx, benchIDs[i%64])
				require.NoError(b, err)
				require.NoError(b, l.Release(ctx))
			}
		}
		report(b)
	})
	b.Run("redislock-style", func(b *testing.B) {
		var tok [16]byte
		for b.Loop() {
			for i := range pairsPerOp {
				_, _ = rand.Read(tok[:])
				value := base64.RawURLEncoding.EncodeToString(tok[:])
				key := "lock:" + benchIDs[i%64]
				require.NoError(b, refObtain.Run(ctx, plain, []string{key}, value, time.Hour.Milliseconds()).Err())
				n, err := refRelease.Run(ctx, plain, []string{key}, value).Int()
				require.NoError(b, err, "release")
				require.Equal(b, 1, n, "release")
			}
		}
		report(b)
	})
}

// benchIDs are room ids built once, so the benchmark does not time fmt.
var benchIDs = func() []string {
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = fmt.Sprintf("ar-%d", i)
	}
	return ids
}()

// The redislock-style yardstick's scripts: obtain (or refresh for the same
// token), and compare-and-DEL.
var (
	refObtain = redis.NewScript(`if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return 1 end
if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) end
return 0`)
	refRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end
return 0`)
)

// leasesPerOp leases are acquired per op of BenchmarkHeldLeaseMemory, so
// that a short run still averages over many.
const leasesPerOp = 1000

// BenchmarkHeldLeaseMemory reports the heap a held lease costs the
// process (the Lease, its strings and map entry; its context is made
// only when asked for).
func BenchmarkHeldLeaseMemory(b *testing.B) {
	m, _, _ := benchManager(b)
	ctx := context.Background()
	ids := make([]string, 0, leasesPerOp)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	i := 0
	for b.Loop() {
		b.StopTimer()
		ids = ids[:0]
		for range leasesPerOp {
			ids = append(ids, fmt.Sprintf("mem-%08d", i))
			i++
		}
		b.StartTimer()
		for _, id := range ids {
			_, err := m.Acquire(ctx, id)
			require.NoError(b, err)
		}
	}
	ids = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	require.Equal(b, i, len(m.snapshot()), "leases held")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(i), "B/lease")
}
