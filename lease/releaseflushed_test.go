package lease

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReleaseFlushedBatches: leases flushed while a release pipeline is in
// flight go together in the next one, instead of one round trip each, and
// each lease's result is reported once.
func TestReleaseFlushedBatches(t *testing.T) {
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
		require.NoError(t, err, "Acquire")
		leases[i] = l
	}
	// One lease's room is someone else's in Redis: its caller alone gets ErrNotHeld.
	c.Set(ctx, leases[n-1].key, "other-node|1|1", 0)

	var (
		mu   sync.Mutex
		errs = map[*Lease][]error{}
	)
	flushed := make(chan *Lease, n)
	released := make(chan struct{})
	go func() {
		defer close(released)
		m.releaseFlushed(ctx, flushed, func(l *Lease, err error) {
			mu.Lock()
			errs[l] = append(errs[l], err)
			mu.Unlock()
		})
	}()
	for _, l := range leases {
		flushed <- l
	}
	close(allAdded)
	close(flushed)
	<-released
	// The first pipeline took what was queued when it started (at least
	// one lease), the second everything queued behind it.
	got := pipelines.Load()
	assert.GreaterOrEqual(t, got, int32(1), "release pipelines; want 1 or 2 for %d leases", n)
	assert.LessOrEqual(t, got, int32(2), "release pipelines; want 1 or 2 for %d leases", n)
	for i, l := range leases {
		if !assert.Len(t, errs[l], 1, "release %s: results", l.label()) {
			continue
		}
		if err := errs[l][0]; i == n-1 {
			assert.ErrorIs(t, err, ErrNotHeld, "release %s, someone else's in Redis", l.label())
			assert.Equal(t, "other-node|1|1", c.Get(ctx, l.key).Val(), "%s: someone else's route, untouched", l.label())
		} else {
			assert.NoError(t, err, "release %s", l.label())
			assert.Zero(t, c.Exists(ctx, l.key).Val(), "%s still in Redis after its release", l.label())
		}
		assert.ErrorIs(t, context.Cause(l.Context()), ErrReleased, "%s: cause", l.label())
	}
	assert.Empty(t, m.snapshot(), "leases still held after their release")
}

// TestReleaseBatchFailingAlikeSaysItsCauseOnce: when every call of a
// release batch fails alike (its primary died), each lease's error says
// the cause once, not once per call of the batch: a drain of thousands of
// rooms would otherwise log a line of megabytes.
func TestReleaseBatchFailingAlikeSaysItsCauseOnce(t *testing.T) {
	const n = 20
	var failing atomic.Bool
	hook := pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		if args := cmds[0].Args(); failing.Load() && len(args) > 1 && args[1] == releaseScript.Hash() {
			for _, c := range cmds {
				c.SetErr(io.ErrUnexpectedEOF) // the connection dropped mid-reply
			}
			return io.ErrUnexpectedEOF
		}
		return next(ctx, cmds)
	}}
	c := standalone(t).client(hook)
	m := startManager(t, c, testConfig())
	leases := make([]*Lease, n)
	for i := range leases {
		l, err := m.Acquire(context.Background(), "alike-"+strconv.Itoa(i))
		require.NoError(t, err, "Acquire")
		require.True(t, l.end(ErrReleased), "end %s", l.label())
		leases[i] = l
	}
	failing.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var mu sync.Mutex
	errs := map[*Lease]error{}
	m.releaseEach(ctx, leases, func(l *Lease, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs[l] = err
	})
	require.Len(t, errs, n, "results")
	for _, l := range leases {
		err := errs[l]
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "release %s", l.label())
		assert.Equal(t, 1, strings.Count(err.Error(), io.ErrUnexpectedEOF.Error()), "release %s: %q: want the cause once", l.label(), err)
	}
}
