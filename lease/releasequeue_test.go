package lease

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestReleaseQueueBatches: leases queued while a release pipeline is in
// flight go together in the next one, instead of one round trip each, and
// each lease's result is reported once.
func TestReleaseQueueBatches(t *testing.T) {
	const n = 50
	var (
		pipelines atomic.Int32
		allAdded  = make(chan struct{})
	)
	isRelease := func(cmds []redis.Cmder) bool {
		args := cmds[0].Args()
		return len(args) > 1 && args[1] == releaseScript.Hash()
	}
	hook := pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		if len(cmds) > 0 && isRelease(cmds) && pipelines.Add(1) == 1 {
			<-allAdded // hold the first release until every lease is queued
		}
		return next(ctx, cmds)
	}}
	c := standalone(t).client(hook)
	m := startManager(t, c, testConfig())
	ctx := context.Background()
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

	var (
		mu   sync.Mutex
		errs = map[*Lease][]error{}
	)
	q := &releaseQueue{m: m, ctx: ctx, done: func(l *Lease, err error) {
		mu.Lock()
		errs[l] = append(errs[l], err)
		mu.Unlock()
	}}
	for _, l := range leases {
		q.add(l)
	}
	close(allAdded)
	q.wait()
	// The first pipeline took what was queued when it started (at least
	// one lease), the second everything queued behind it.
	if got := pipelines.Load(); got < 1 || got > 2 {
		t.Errorf("release pipelines: got %d; want 1 or 2 for %d leases", got, n)
	}
	for i, l := range leases {
		wantNotHeld := i == n-1
		if len(errs[l]) != 1 {
			t.Errorf("release %s: %d results; want 1", l.label(), len(errs[l]))
			continue
		}
		if err := errs[l][0]; errors.Is(err, ErrNotHeld) != wantNotHeld || (!wantNotHeld && err != nil) {
			t.Errorf("release %s: got %v; want not-held %v", l.label(), err, wantNotHeld)
		}
		if n := c.Exists(ctx, l.key).Val(); n != 0 {
			t.Errorf("%s still in Redis after its release", l.label())
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, ErrReleased) {
			t.Errorf("%s: cause %v; want %v", l.label(), cause, ErrReleased)
		}
	}
	if got := len(m.snapshot(false)); got != 0 {
		t.Errorf("%d leases still held after their release; want 0", got)
	}
}
