package lease

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestReleaseQueueBatches: leases that become ready while a release
// pipeline is in flight go together in the next one, instead of one round
// trip each, and every caller gets its own lease's result.
func TestReleaseQueueBatches(t *testing.T) {
	const n = 50
	var (
		q         *releaseQueue
		pipelines atomic.Int32
	)
	isRelease := func(cmds []redis.Cmder) bool {
		args := cmds[0].Args()
		return len(args) > 1 && args[1] == releaseScript.Hash()
	}
	hook := pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		if len(cmds) > 0 && isRelease(cmds) && pipelines.Add(1) == 1 {
			// Hold the first release until every other caller has queued.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				q.mu.Lock()
				queued := len(q.queued)
				q.mu.Unlock()
				if queued == n-1 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%d of %d releases queued behind the first after 5 s", queued, n-1)
					break
				}
			}
		}
		return next(ctx, cmds)
	}}
	c := standalone(t).client(hook)
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	q = &releaseQueue{m: m, ctx: ctx}
	leases := make([]*Lease, n)
	for i := range leases {
		l, err := m.Acquire(ctx, "queue-"+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		leases[i] = l
	}
	// One lease is already gone from Redis: its caller alone gets ErrNotHeld.
	c.Del(ctx, leases[n-1].key)

	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, l := range leases {
		wg.Go(func() { errs[i] = q.release(l) })
	}
	wg.Wait()
	if got := pipelines.Load(); got != 2 {
		t.Errorf("release pipelines: got %d; want 2 (the first, then every lease queued behind it)", got)
	}
	for i, l := range leases {
		wantNotHeld := i == n-1
		if gotNotHeld := errors.Is(errs[i], ErrNotHeld); gotNotHeld != wantNotHeld || (!wantNotHeld && errs[i] != nil) {
			t.Errorf("release %s: got %v; want not-held %v", l, errs[i], wantNotHeld)
		}
		if n := c.Exists(ctx, l.key).Val(); n != 0 {
			t.Errorf("%s still in Redis after its release", l)
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, ErrReleased) {
			t.Errorf("%s: cause %v; want %v", l, cause, ErrReleased)
		}
	}
	if got := len(m.Leases()); got != 0 {
		t.Errorf("%d leases still held after their release; want 0", got)
	}
}
