package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fencedAppend is the recorder's storage: it appends the writer's fence to
// the room's log only while the writer's lease is the route's value.
var fencedAppend = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1`)

// interval is one lease's time as owner, as its holders saw it.
type interval struct {
	node       string
	fence      int64
	start, end time.Time
}

// recorder collects ownership intervals and writes refused while the writer
// still believed it held the room.
//
// An interval belongs to a *Lease, not to a caller: Acquire of a room this
// Manager already holds returns the same *Lease, so two workers of one
// Manager may share one ownership. Its first begin starts it; the first stop
// by any of its holders, OnLost or the end of the lease's context ends it,
// and nothing restarts it: a begin after the end (a worker whose Acquire
// returned the lease while another holder was releasing it) is counted in
// lateJoins, not taken for a new ownership.
type recorder struct {
	mu        sync.Mutex
	intervals map[*Lease]*interval
	refused   []string
	lateJoins []string
	writes    int
	// enough is closed once the competition has seen enoughOwners
	// ownerships and enoughWrites writes: the run lasts as long as the
	// machine needs to get there, not a fixed time.
	enough                     chan struct{}
	enoughOwners, enoughWrites int
}

func (r *recorder) begin(l *Lease, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if iv := r.intervals[l]; iv != nil {
		if !iv.end.IsZero() {
			r.lateJoins = append(r.lateJoins, fmt.Sprintf("%s by %s, %s after %s stopped it",
				l.label(), node, time.Since(iv.end), iv.node))
		}
		return
	}
	r.intervals[l] = &interval{node: node, fence: l.Token(), start: time.Now()}
	context.AfterFunc(l.Context(), func() { r.stop(l, time.Now()) })
	r.checkEnough()
}

// checkEnough closes enough once the run has seen enough; r.mu is held.
func (r *recorder) checkEnough() {
	if r.enough == nil || len(r.intervals) < r.enoughOwners || r.writes < r.enoughWrites {
		return
	}
	select {
	case <-r.enough:
	default:
		close(r.enough)
	}
}

// stop ends l's interval the first time it is called.
func (r *recorder) stop(l *Lease, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if iv := r.intervals[l]; iv != nil && iv.end.IsZero() {
		iv.end = at
	}
}

// TestMutualExclusion lets managers compete for a few rooms while their
// renewals are dropped at random, so leases are lost, expire and move. No
// two holders' intervals of one room overlap, and no write is refused while
// its writer still held the lease.
func TestMutualExclusion(t *testing.T) {
	b := standalone(t)
	rooms := []string{"mx-1", "mx-2", "mx-3"}
	rec := &recorder{intervals: map[*Lease]*interval{},
		enough: make(chan struct{}), enoughOwners: 4 * len(rooms), enoughWrites: 50}
	// The competition runs until it has seen rooms change hands and
	// writes enough, however slow the machine; the bound only stops a run
	// that never gets there, which the check below then reports.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		select {
		case <-rec.enough:
			cancel()
		case <-ctx.Done():
		}
	}()

	var wg sync.WaitGroup
	for n := range 3 {
		dropRenewals := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			if isScript(cmd, sessionRenewScript) && rand.IntN(2) == 0 {
				return errors.New("renewal dropped")
			}
			return next(ctx, cmd)
		}}
		c := b.client(dropRenewals)
		cfg := testConfig()
		cfg.OnLost = func(l *Lease, _ error) { rec.stop(l, time.Now()) }
		m := startManager(t, c, cfg)
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				compete(ctx, m, c, rooms, rec, fmt.Sprintf("%d/%d", n, w))
			}()
		}
	}
	wg.Wait()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Empty(t, rec.refused, "writes refused while the writer held the lease")
	for _, j := range rec.lateJoins {
		t.Logf("lease returned to a second holder after the first stopped it (same ownership, not a new one): %s", j)
	}
	byRoom := map[string][]*interval{}
	for l, iv := range rec.intervals {
		if iv.end.IsZero() {
			iv.end = time.Now() // still held at the end
		}
		byRoom[l.ID()] = append(byRoom[l.ID()], iv)
	}
	owners := 0
	for room, ivs := range byRoom {
		slices.SortFunc(ivs, func(a, b *interval) int { return int(a.fence - b.fence) })
		owners += len(ivs)
		for i := 1; i < len(ivs); i++ {
			prev, cur := ivs[i-1], ivs[i]
			assert.NotEqual(t, prev.fence, cur.fence, "room %s: fence issued twice", room)
			assert.False(t, cur.start.Before(prev.end), "room %s: %s (fence %d) started %s before %s (fence %d) stopped",
				room, cur.node, cur.fence, prev.end.Sub(cur.start), prev.node, prev.fence)
		}
	}
	require.GreaterOrEqual(t, owners, rec.enoughOwners, "ownerships in a minute; want rooms to change hands")
	require.GreaterOrEqual(t, rec.writes, rec.enoughWrites, "writes in a minute")
}

// compete acquires random rooms and writes to them with random pauses,
// releasing some and keeping others until lost.
func compete(ctx context.Context, m *Manager, c redis.UniversalClient, rooms []string, rec *recorder, who string) {
	pause := func(max time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Duration(rand.Int64N(int64(max)))): // a random stall of the holder
			return true
		}
	}
	for ctx.Err() == nil {
		l, err := m.Acquire(ctx, rooms[rand.IntN(len(rooms))])
		if err != nil {
			pause(20 * time.Millisecond)
			continue
		}
		rec.begin(l, who)
		for range rand.IntN(30) {
			if l.Context().Err() != nil || !pause(30*time.Millisecond) {
				break
			}
			if l.Context().Err() != nil {
				break // checked right before the write, as an owner would
			}
			ok, err := fencedAppend.Run(ctx, c, []string{l.key, "log:{" + l.ID() + "}"}, l.value, l.Token()).Int()
			if err != nil {
				continue // a failed write proves nothing either way
			}
			rec.mu.Lock()
			rec.writes++
			rec.checkEnough()
			if ok == 0 && l.Context().Err() == nil {
				rec.refused = append(rec.refused, fmt.Sprintf("%s by %s", l.label(), who))
			}
			rec.mu.Unlock()
		}
		if l.held() && rand.IntN(2) == 0 {
			rec.stop(l, time.Now())
			_ = l.Release(context.Background())
		}
	}
}
