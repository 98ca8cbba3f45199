package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestContract runs the script contract on a standalone server and on a
// 3-node cluster.
func TestContract(t *testing.T) {
	for _, start := range []func(*testing.T) backend{standalone, cluster} {
		b := start(t)
		t.Run(b.name, func(t *testing.T) {
			t.Run("idempotent acquire", func(t *testing.T) { testIdempotentAcquire(t, b) })
			t.Run("retry after a lost reply", func(t *testing.T) { testAcquireRetry(t, b) })
			t.Run("held by another", func(t *testing.T) { testHeld(t, b) })
			t.Run("session gone", func(t *testing.T) { testSessionGone(t, b) })
			t.Run("release only own", func(t *testing.T) { testReleaseOwn(t, b) })
			t.Run("fence increases", func(t *testing.T) { testFenceIncreases(t, b) })
			t.Run("owner", func(t *testing.T) { testOwner(t, b) })
			t.Run("renewal is one call", func(t *testing.T) { testRenewalIsOneCall(t, b) })
			t.Run("place", func(t *testing.T) { testPlace(t, b) })
			t.Run("place skips draining and ended", func(t *testing.T) { testPlaceSkipsDrainingAndEnded(t, b) })
		})
	}
}

func testIdempotentAcquire(t *testing.T, b backend) {
	m := startManager(t, b.client(), testConfig())
	ctx := context.Background()
	l1, err := m.Acquire(ctx, "idem")
	require.NoError(t, err, "Acquire")
	l2, err := m.Acquire(ctx, "idem")
	require.NoError(t, err, "second Acquire")
	require.Same(t, l1, l2, "second Acquire: want the same lease")
	require.Equal(t, "idem", l1.ID(), "lease ID")
	require.Positive(t, l1.Token(), "lease token")
}

// testAcquireRetry loses the reply of a successful acquire; the retry must
// get the same lease (same fence), not ErrHeld.
func testAcquireRetry(t *testing.T, b backend) {
	var armed atomic.Bool
	drop := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		if err == nil && isScript(cmd, acquireScript) && armed.CompareAndSwap(true, false) {
			return errors.New("reply lost") // the script ran; the caller never hears
		}
		return err
	}}
	c := b.client(drop)
	m := startManager(t, c, testConfig())
	armed.Store(true)
	ctx := context.Background()
	_, err := m.Acquire(ctx, "retry")
	require.Error(t, err, "first Acquire: want the injected lost reply")
	l, err := m.Acquire(ctx, "retry")
	require.NoError(t, err, "retry Acquire")
	require.Equal(t, l.value, c.Get(ctx, m.routeKey("retry")).Val(), "route value")
}

func testHeld(t *testing.T, b backend) {
	c := b.client()
	a, o := startManager(t, c, testConfig()), startManager(t, c, testConfig())
	ctx := context.Background()
	la, err := a.Acquire(ctx, "held")
	require.NoError(t, err, "Acquire")
	_, err = o.Acquire(ctx, "held")
	require.ErrorIs(t, err, ErrHeld, "other Acquire")
	require.EqualError(t, err, fmt.Sprintf(`lease: held by another holder: room "held" by node %q (fence %d)`, a.cfg.Node, la.Token()),
		"other Acquire: want the holder named")

	// A value nobody of us wrote is someone else's: never overwritten.
	key := o.routeKey("garbage")
	c.Set(ctx, key, "not-a-lease", 0)
	_, err = o.Acquire(ctx, "garbage")
	require.ErrorIs(t, err, ErrHeld, "Acquire over an unparseable value")
	require.ErrorContains(t, err, "unrecognised value", "Acquire over an unparseable value")
	require.Equal(t, "not-a-lease", c.Get(ctx, key).Val(), "unparseable value: want it untouched")
}

// testSessionGone deletes the node's session in Redis: the next renewal
// finds it gone, every lease is lost at once, the old epoch is not
// re-created and a new one starts, under which the rooms are acquired
// again with higher fences.
func testSessionGone(t *testing.T, b backend) {
	c := b.client()
	cfg := testConfig()
	cfg.TTL = time.Minute // the test drives the renewal
	m := startManager(t, c, cfg)
	ctx := context.Background()
	l, err := m.Acquire(ctx, "gone")
	require.NoError(t, err, "Acquire")
	old := m.sess.Load().epoch
	require.NoError(t, c.Del(ctx, m.nodeKey()).Err())
	require.ErrorIs(t, m.tick(ctx), errSessionLost, "renewal of a deleted session")
	require.True(t, isLost(l), "lease not lost after its session was deleted (cause %v); want lost", context.Cause(l.Context()))
	cause := context.Cause(l.Context())
	require.ErrorIs(t, cause, ErrLost, "cause")
	require.ErrorContains(t, cause, "session ended", "cause")
	now := m.sess.Load()
	require.NotNil(t, now, "no new session after the old one was lost")
	require.Greater(t, now.epoch, old, "new epoch")
	require.Equal(t, strconv.FormatInt(now.epoch, 10), c.HGet(ctx, m.nodeKey(), "epoch").Val(), "session in Redis")
	again, err := m.Acquire(ctx, "gone")
	require.NoError(t, err, "Acquire under the new session")
	require.Greater(t, again.Token(), l.Token(), "fence under the new session")
	require.Equal(t, again.value, c.Get(ctx, again.key).Val(), "route under the new session")
}

func testReleaseOwn(t *testing.T, b backend) {
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()

	mine, err := m.Acquire(ctx, "rel-mine")
	require.NoError(t, err, "Acquire")
	require.NoError(t, mine.Release(ctx), "Release")
	require.Zero(t, c.Exists(ctx, mine.key).Val(), "key exists after Release; want deleted")
	require.ErrorIs(t, context.Cause(mine.Context()), ErrReleased, "cause after Release")

	taken, err := m.Acquire(ctx, "rel-taken")
	require.NoError(t, err, "Acquire")
	c.Set(ctx, taken.key, "other|y|9", 0)
	require.ErrorIs(t, taken.Release(ctx), ErrNotHeld, "Release of a taken lease")
	require.Equal(t, "other|y|9", c.Get(ctx, taken.key).Val(), "Release deleted or changed another holder's key")
}

// testFenceIncreases checks the fence across release, expiry and the loss
// of the counter key.
func testFenceIncreases(t *testing.T, b backend) {
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	var last int64
	next := func(step string) *Lease {
		t.Helper()
		l, err := m.Acquire(ctx, "fence")
		require.NoError(t, err, "%s: Acquire", step)
		require.Greater(t, l.Token(), last, "%s: fence", step)
		last = l.Token()
		return l
	}
	l := next("first")
	_ = l.Release(ctx)
	next("after release")
	c.Del(ctx, m.nodeKey())
	_ = m.tick(ctx) // finds the session gone
	l = next("after the session ended")
	c.Del(ctx, m.fenceKey("fence"))
	_ = l.Release(ctx)
	next("after the counter was lost")
}

func testOwner(t *testing.T, b backend) {
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	_, err := m.Owner(ctx, "owner")
	require.ErrorIs(t, err, ErrNotHeld, "Owner of a free room")
	l, err := m.Acquire(ctx, "owner")
	require.NoError(t, err, "Acquire")
	got, err := m.Owner(ctx, "owner")
	require.NoError(t, err, "Owner")
	require.Equal(t, Owner{Node: m.cfg.Node, Addr: m.cfg.Addr, Fence: l.Token()}, got, "Owner")

	// Another node whose session ended holds nothing, although its route
	// is still there.
	cfg := testConfig()
	cfg.TTL = time.Minute
	o := startManager(t, c, cfg)
	_, err = o.Acquire(ctx, "owner-ended")
	require.NoError(t, err, "Acquire by the other node")
	require.NoError(t, c.Del(ctx, o.nodeKey()).Err())
	_, err = m.Owner(ctx, "owner-ended")
	require.ErrorIs(t, err, ErrNotHeld, "Owner of a room whose holder's session ended")
}

// testRenewalIsOneCall holds leases on every slot owner: a renewal round
// is still one call, the session's, and sends nothing per lease.
func testRenewalIsOneCall(t *testing.T, b backend) {
	var sent atomic.Int32
	c := b.client(countCommands(&sent))
	cfg := testConfig()
	cfg.TTL = time.Minute // the test drives the renewal
	m := startManager(t, c, cfg)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		_, err := m.Acquire(ctx, "many-"+id)
		require.NoError(t, err, "Acquire")
	}
	before := m.okAt.Load()
	sent.Store(0)
	require.NoError(t, m.tick(ctx), "renewal round")
	require.EqualValues(t, 1, sent.Load(), "commands sent by a renewal round with 8 leases")
	require.True(t, m.okAt.Load().After(*before), "session renewed")
	for _, l := range m.snapshot() {
		require.True(t, l.held(), "lease %s: want held", l.label())
	}
}

// isScript reports whether cmd runs script (as EVALSHA or EVAL).
func isScript(cmd redis.Cmder, script *redis.Script) bool {
	args := cmd.Args()
	return len(args) > 1 && (args[1] == script.Hash() || args[1] == scriptSources[script])
}
