package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/lease"
)

// leaseTTL is every contender's lease lifetime. An hour keeps drainkit's
// renewer (it ticks every TTL/3) out of the measurements: the benchmarks
// drive renewal themselves. The TTL does not change what a call costs.
const leaseTTL = time.Hour

// newManager returns a started drainkit lease.Manager for node: defaults
// for everything but the TTL (so CallTimeout is TTL/6, key prefixes
// room:route:/room:fence:/room:node:).
func newManager(b *testing.B, c *counted, node string) *lease.Manager {
	b.Helper()
	m, err := lease.New(c.Client, lease.Config{
		Node:   node,
		TTL:    leaseTTL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return m
}

// parallel runs fn(i) for i in [0, n) on w goroutines, round robin.
func parallel(n, w int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for g := range w {
		wg.Go(func() {
			for i := g; i < n; i += w {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// BenchmarkLeaseAcquireRelease: one acquire followed by its release, one
// pair at a time, over loopback to one redis-server (64 rooms in turn).
// Target: drainkit at least 1.0x redislock's pairs per second; both pay
// two round trips, the floor. c=bare runs drainkit's own acquire and
// release scripts straight through go-redis, with no library around them:
// what a lease with drainkit's fencing token costs at the least, so its
// gap to drainkit is the library's and its gap to redislock the token's.
//
//	go test -run='^$' -bench='LeaseAcquireRelease' -count=5 ./bench
func BenchmarkLeaseAcquireRelease(b *testing.B) {
	ctx := context.Background()
	b.Run("c=drainkit", func(b *testing.B) {
		c := newRedisClient(b)
		defer c.Close()
		m := newManager(b, c, "ar")
		defer m.Stop(ctx)
		pairs(b, c, func(i int) error {
			l, err := m.Acquire(ctx, "ar-"+strconv.Itoa(i%64))
			if err != nil {
				return err
			}
			return l.Release(ctx)
		})
	})
	b.Run("c=bare", func(b *testing.B) {
		c := newRedisClient(b)
		defer c.Close()
		acquire, release := drainkitScript(b, c, "acquire.lua"), drainkitScript(b, c, "release.lua")
		const node, holder = "ar-bare", "0123456789abcdef"
		// The fence key's retention is the lease package's (24 h); it only
		// sets a TTL, so its value changes nothing of the cost.
		args := []any{node, holder, leaseTTL.Milliseconds(), (24 * time.Hour).Milliseconds()}
		pairs(b, c, func(i int) error {
			id := "{ar-" + strconv.Itoa(i%64) + "}"
			got, err := acquire.EvalSha(ctx, c, []string{"room:route:" + id, "room:fence:" + id}, args...).Slice()
			if err != nil {
				return err
			}
			if len(got) != 2 || got[0] != int64(1) {
				return fmt.Errorf("acquire %s: %v; want {1, fence}", id, got)
			}
			value := node + "|" + holder + "|" + got[1].(string)
			st, err := release.EvalSha(ctx, c, []string{"room:route:" + id}, value).Slice()
			if err != nil {
				return err
			}
			if len(st) != 1 || st[0] != int64(1) {
				return fmt.Errorf("release %s: %v; want {1}", id, st)
			}
			return nil
		})
	})
	b.Run("c=redislock", func(b *testing.B) {
		c := newRedisClient(b)
		defer c.Close()
		// nil Options: the default RetryStrategy, NoRetry — one try.
		locker := redislock.New(c.Client)
		pairs(b, c, func(i int) error {
			lock, err := locker.Obtain(ctx, "room:route:{ar-"+strconv.Itoa(i%64)+"}", leaseTTL, nil)
			if err != nil {
				return err
			}
			return lock.Release(ctx)
		})
	})
	b.Run("c=redsync", func(b *testing.B) {
		c := newRedisClient(b)
		defer c.Close()
		// One pool (one Redis: quorum 1), one try, the same expiry.
		rs := redsync.New(redsyncgoredis.NewPool(c.Client))
		pairs(b, c, func(i int) error {
			mu := rs.NewMutex("room:route:{ar-"+strconv.Itoa(i%64)+"}", redsync.WithExpiry(leaseTTL), redsync.WithTries(1))
			if err := mu.LockContext(ctx); err != nil {
				return err
			}
			if ok, err := mu.UnlockContext(ctx); !ok || err != nil {
				return fmt.Errorf("unlock: %v, %v", ok, err)
			}
			return nil
		})
	})
}

// drainkitScript loads one of drainkit's lease scripts, the file the lease
// package embeds, for a contender that runs it without the library.
func drainkitScript(b *testing.B, c *counted, name string) *redis.Script {
	b.Helper()
	src, err := os.ReadFile(filepath.Join("..", "lease", "scripts", name))
	if err != nil {
		b.Fatal(err)
	}
	s := redis.NewScript(string(src))
	if err := s.Load(context.Background(), c).Err(); err != nil {
		b.Fatal(err)
	}
	return s
}

func pairs(b *testing.B, c *counted, pair func(i int) error) {
	trips, cpu := c.serverWork(b, func() {
		i := 0
		for b.Loop() {
			if err := pair(i); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	b.ReportMetric(float64(trips)/float64(b.N), "round-trips/op")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "redis-cpu-ns/op")
}

// Held leases are set up once per process and size (an acquisition of
// 100,000 leases takes seconds) and shared by the renewal benchmarks and
// every -count.
var (
	fixturesMu sync.Mutex
	ourHeld    = map[int]*ourFixture{}
	lockHeld   = map[int]*lockFixture{}
)

type ourFixture struct {
	c             *counted
	m             *lease.Manager
	bytesPerLease float64
}

type lockFixture struct {
	c     *counted
	locks []*redislock.Lock
}

// drainkitHeld returns a manager holding n leases, and the heap each one
// costs this process.
func drainkitHeld(b *testing.B, n int) *ourFixture {
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if f := ourHeld[n]; f != nil {
		return f
	}
	c := newRedisClient(b)
	m := newManager(b, c, "held-"+strconv.Itoa(n))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := parallel(n, 32, func(i int) error {
		_, err := m.Acquire(context.Background(), heldID(n, i))
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	f := &ourFixture{c: c, m: m, bytesPerLease: float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)}
	ourHeld[n] = f
	return f
}

// heldID is the room id of drainkitHeld's lease i of n.
func heldID(n, i int) string { return "held-" + strconv.Itoa(n) + "-" + strconv.Itoa(i) }

// redislockHeld returns n redislock locks held.
func redislockHeld(b *testing.B, n int) *lockFixture {
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if f := lockHeld[n]; f != nil {
		return f
	}
	c := newRedisClient(b)
	locker := redislock.New(c.Client)
	locks := make([]*redislock.Lock, n)
	err := parallel(n, 32, func(i int) error {
		var err error
		locks[i], err = locker.Obtain(context.Background(), "lock:{held-"+strconv.Itoa(n)+"-"+strconv.Itoa(i)+"}", leaseTTL, nil)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	f := &lockFixture{c: c, locks: locks}
	lockHeld[n] = f
	return f
}

// BenchmarkLeaseRenew: renewing every held lease once, as each renewal
// tick must. drainkit's renewer sends them all (and the node heartbeat) in
// one pipeline; redislock has Lock.Refresh, called once per lock, either
// one after another or from 16 goroutines. Targets at 10,000: drainkit 20x
// faster than one by one, 7x faster than 16 goroutines.
//
//	go test -run='^$' -bench='LeaseRenew$' -benchtime=0.5s -count=3 ./bench
func BenchmarkLeaseRenew(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{100, 1_000, 10_000} {
		b.Run("leases="+strconv.Itoa(n)+"/c=drainkit", func(b *testing.B) {
			f := drainkitHeld(b, n)
			renewals(b, f.c, n, func() error { return f.m.Renew(ctx) })
			if got := f.m.Held(); got != n {
				b.Fatalf("%d leases held after renewing; want %d", got, n)
			}
		})
		b.Run("leases="+strconv.Itoa(n)+"/c=redislock-serial", func(b *testing.B) {
			f := redislockHeld(b, n)
			renewals(b, f.c, n, func() error {
				for _, l := range f.locks {
					if err := l.Refresh(ctx, leaseTTL, nil); err != nil {
						return err
					}
				}
				return nil
			})
		})
		b.Run("leases="+strconv.Itoa(n)+"/c=redislock-16", func(b *testing.B) {
			f := redislockHeld(b, n)
			renewals(b, f.c, n, func() error {
				return parallel(n, 16, func(i int) error { return f.locks[i].Refresh(ctx, leaseTTL, nil) })
			})
		})
	}
}

func renewals(b *testing.B, c *counted, n int, renew func() error) {
	trips, cpu := c.serverWork(b, func() {
		for b.Loop() {
			if err := renew(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/lease")
	b.ReportMetric(float64(trips)/float64(b.N), "round-trips/op")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "redis-cpu-ns/lease")
}

// BenchmarkLeaseRenewScale: drainkit's renewal round against the number
// of held leases, up to 100,000, with the heap each held lease costs the
// process (target: at most 300 B). At the default 10 s TTL a round must
// finish well inside the 3.3 s tick.
//
// Beside it, three floors, measured in the same process after it (bare,
// read, getex):
//
//   - c=bare sets the expiry of the same keys and nothing else: a script
//     per 500 keys, one pipeline, the keys in a random order as drainkit's
//     renewer has them. It looks at no value, so it is no renewal (it
//     would extend a key another holder took, and could not tell) and no
//     contender offers it: it is the least that setting these keys'
//     expiries costs redis-server and the client. (One PEXPIRE command per
//     key costs more: go-redis's per-command work, 4 allocations a key,
//     outweighs the script.)
//   - c=read and c=getex are the two ways a script can look at every
//     key's value while setting its expiry, still with no compare and no
//     value sent. c=read is bare after one MGET of the batch's keys, the
//     cheapest read a script has; it is drainkit's order (look, then
//     extend). c=getex runs GETEX ... PXAT per key, which extends and
//     returns the value in one call; a renewal built on it would extend a
//     key another holder took before seeing that it did (drainkit's
//     compare-first never touches another holder's key), but as a floor
//     it counts. A safe renewal must compare each key's value with its
//     lease's, and no Redis from 5.0 through 7.x has a command that
//     compares and extends without handing the value to the script
//     (PEXPIRE's conditions look at the expiry only; SET ... XX GET would
//     also take each lease's value as an argument and rewrite it): the
//     cheaper of c=read and c=getex is the least such a renewal costs with
//     this key layout. GETEX needs Redis 6.2 or later.
//
// bench/run runs this in three processes of -count=1, so that each
// repetition measures drainkit and its floors back to back.
//
//	go test -run='^$' -bench='LeaseRenewScale' -benchtime=3x -count=1 ./bench
func BenchmarkLeaseRenewScale(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run("leases="+strconv.Itoa(n)+"/c=drainkit", func(b *testing.B) {
			f := drainkitHeld(b, n)
			renewals(b, f.c, n, func() error { return f.m.Renew(ctx) })
			// Renew returns nil for leases Redis reports gone or taken
			// (it ends them): without this a broken renewal would empty
			// the shared fixture and time rounds that renew nothing.
			if got := f.m.Held(); got != n {
				b.Fatalf("%d leases held after renewing; want %d", got, n)
			}
			b.ReportMetric(f.bytesPerLease, "B/lease")
		})
		for _, floor := range []struct {
			name   string
			script *redis.Script
		}{{"bare", expireOnly}, {"read", readThenExpire}, {"getex", extendAndRead}} {
			b.Run("leases="+strconv.Itoa(n)+"/c="+floor.name, func(b *testing.B) {
				f := drainkitHeld(b, n)
				keys := make([]string, n)
				for i := range keys {
					keys[i] = "room:route:{" + heldID(n, i) + "}"
				}
				rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
				if err := floor.script.Load(ctx, f.c).Err(); err != nil {
					b.Fatal(err)
				}
				renewals(b, f.c, n, func() error {
					pipe := f.c.Pipeline()
					var calls []*redis.Cmd
					for s := 0; s < n; s += 500 {
						calls = append(calls, floor.script.EvalSha(ctx, pipe, keys[s:min(s+500, n)], leaseTTL.Milliseconds()))
					}
					if _, err := pipe.Exec(ctx); err != nil {
						return err
					}
					set := int64(0)
					for _, c := range calls {
						set += c.Val().(int64)
					}
					if set != int64(n) {
						return fmt.Errorf("%s renewal set %d expiries; want %d", floor.name, set, n)
					}
					return nil
				})
			})
		}
	}
}

// floorScript is a floor's renewal script: body runs after the deadline
// renew.lua computes (the same TIME, one PEXPIREAT deadline per call, in
// at) and returns how many keys it extended.
func floorScript(body string) *redis.Script {
	return redis.NewScript(`
local t = redis.call('TIME')
local at = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1]))
local n = 0
` + body + `
return n
`)
}

// expireOnly is c=bare's renewal: drainkit's renew.lua without the
// compare.
var expireOnly = floorScript(`
for i = 1, #KEYS do
  n = n + redis.call('PEXPIREAT', KEYS[i], at)
end`)

// extendAndRead is c=getex's renewal: GETEX with the deadline per key,
// counting the keys that had a value (GETEX does not create a missing
// key).
var extendAndRead = floorScript(`
for i = 1, #KEYS do
  if redis.call('GETEX', KEYS[i], 'PXAT', at) then
    n = n + 1
  end
end`)

// readThenExpire is c=read's renewal: expireOnly after one MGET of the
// batch's keys, extending only the keys that have a value (which PEXPIREAT
// would find anyway) so that the values read are used.
var readThenExpire = floorScript(`
local cur = redis.call('MGET', unpack(KEYS))
for i = 1, #KEYS do
  if cur[i] then
    n = n + redis.call('PEXPIREAT', KEYS[i], at)
  end
end`)

// BenchmarkLeaseReleaseAll: giving up every held lease at drain, wall time
// and round trips. drainkit's Release hook (Manager.ReleaseHook) stops the
// renewer, releases all in one pipeline and deletes the node heartbeat;
// with redislock the drain calls Lock.Release per lock, one by one or from
// 16 goroutines. Each op acquires the leases first, off the clock.
//
//	go test -run='^$' -bench='LeaseReleaseAll' -benchtime=1x -count=3 ./bench
func BenchmarkLeaseReleaseAll(b *testing.B) {
	ctx := context.Background()
	redisServer(b) // started off the clock: the sub-benchmarks time only the releases
	for _, n := range []int{100, 1_000, 10_000} {
		b.Run("leases="+strconv.Itoa(n)+"/c=drainkit", func(b *testing.B) {
			c := newRedisClient(b)
			defer c.Close()
			releases(b, c, func(op int) func() error {
				node := "rel-" + strconv.Itoa(n) + "-" + strconv.Itoa(op)
				m := newManager(b, c, node)
				if err := parallel(n, 32, func(i int) error {
					_, err := m.Acquire(ctx, node+"-"+strconv.Itoa(i))
					return err
				}); err != nil {
					b.Fatal(err)
				}
				release := m.ReleaseHook()
				return func() error { return release.Run(ctx) }
			})
		})
		for _, w := range []int{1, 16} {
			name := "redislock-serial"
			if w > 1 {
				name = "redislock-16"
			}
			b.Run("leases="+strconv.Itoa(n)+"/c="+name, func(b *testing.B) {
				c := newRedisClient(b)
				defer c.Close()
				locker := redislock.New(c.Client)
				releases(b, c, func(op int) func() error {
					locks := make([]*redislock.Lock, n)
					prefix := "lock:{rel-" + name + "-" + strconv.Itoa(n) + "-" + strconv.Itoa(op) + "-"
					if err := parallel(n, 32, func(i int) error {
						var err error
						locks[i], err = locker.Obtain(ctx, prefix+strconv.Itoa(i)+"}", leaseTTL, nil)
						return err
					}); err != nil {
						b.Fatal(err)
					}
					return func() error {
						return parallel(n, w, func(i int) error { return locks[i].Release(ctx) })
					}
				})
			})
		}
	}
}

// releases times release() only; setup(op) acquires off the clock.
func releases(b *testing.B, c *counted, setup func(op int) func() error) {
	var trips int64
	b.StopTimer()
	for op := range b.N {
		release := setup(op)
		start := c.trips.Load()
		b.StartTimer()
		if err := release(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		trips += c.trips.Load() - start
	}
	b.ReportMetric(float64(trips)/float64(b.N), "round-trips/op")
}

// BenchmarkLeaseHandOff: the drain of a node holding 10,000 rooms whose
// state is flushed before each room moves. drainkit: the gate closed at the flip, the
// HandOff hook (flush, then release, up to 16 rooms at a time; released
// rooms share pipelines) and the Release hook (renewer stopped, heartbeat
// deleted). redislock: flush then Lock.Release per lock, one by one or
// from 16 goroutines. The flush is the service's own work and the same
// for every contender, so here it returns at once: the table shows what
// the lease machinery adds. Each op acquires the leases first, off the
// clock.
//
//	go test -run='^$' -bench='LeaseHandOff' -benchtime=1x -count=3 ./bench
func BenchmarkLeaseHandOff(b *testing.B) {
	ctx := context.Background()
	redisServer(b) // started off the clock
	const n = 10_000
	flush := func(context.Context, string) error { return nil }
	b.Run("leases=10000/c=drainkit", func(b *testing.B) {
		c := newRedisClient(b)
		defer c.Close()
		releases(b, c, func(op int) func() error {
			node := "handoff-" + strconv.Itoa(op)
			m, err := lease.New(c.Client, lease.Config{
				Node: node, TTL: leaseTTL,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Start(ctx); err != nil {
				b.Fatal(err)
			}
			if err := parallel(n, 32, func(i int) error {
				_, err := m.Acquire(ctx, node+"-"+strconv.Itoa(i))
				return err
			}); err != nil {
				b.Fatal(err)
			}
			handOff, err := m.HandOff(func(ctx context.Context, l *lease.Lease) error { return flush(ctx, l.ID()) }, 16)
			if err != nil {
				b.Fatal(err)
			}
			release := m.ReleaseHook()
			return func() error {
				if err := handOff.Run(ctx); err != nil {
					return err
				}
				if err := release.Run(ctx); err != nil {
					return err
				}
				if left := m.Held(); left != 0 {
					return fmt.Errorf("%d leases left after the hand-off", left)
				}
				return nil
			}
		})
	})
	for _, w := range []int{1, 16} {
		name := "redislock-serial"
		if w > 1 {
			name = "redislock-16"
		}
		b.Run("leases=10000/c="+name, func(b *testing.B) {
			c := newRedisClient(b)
			defer c.Close()
			locker := redislock.New(c.Client)
			releases(b, c, func(op int) func() error {
				locks := make([]*redislock.Lock, n)
				prefix := "lock:{handoff-" + name + "-" + strconv.Itoa(op) + "-"
				if err := parallel(n, 32, func(i int) error {
					var err error
					locks[i], err = locker.Obtain(ctx, prefix+strconv.Itoa(i)+"}", leaseTTL, nil)
					return err
				}); err != nil {
					b.Fatal(err)
				}
				return func() error {
					return parallel(n, w, func(i int) error {
						if err := flush(ctx, locks[i].Key()); err != nil {
							return err
						}
						return locks[i].Release(ctx)
					})
				}
			})
		})
	}
}
