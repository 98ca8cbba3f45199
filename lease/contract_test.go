package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

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
			t.Run("renew after expiry", func(t *testing.T) { testRenewGone(t, b) })
			t.Run("renew stolen", func(t *testing.T) { testRenewStolen(t, b) })
			t.Run("release only own", func(t *testing.T) { testReleaseOwn(t, b) })
			t.Run("fence increases", func(t *testing.T) { testFenceIncreases(t, b) })
			t.Run("owner", func(t *testing.T) { testOwner(t, b) })
			t.Run("many leases renewed", func(t *testing.T) { testRenewMany(t, b) })
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
		if err == nil && strings.HasPrefix(cmd.Name(), "eval") && armed.CompareAndSwap(true, false) {
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

// testRenewGone lets a lease expire in Redis: the renewal reports it gone,
// the lease is lost at once and the key is not re-created.
func testRenewGone(t *testing.T, b backend) {
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	l, err := m.Acquire(ctx, "gone")
	require.NoError(t, err, "Acquire")
	expireNow(t, c, l.key)
	require.NoError(t, m.Renew(ctx), "RenewAll")
	require.True(t, isLost(l), "lease not lost after the key expired (cause %v); want lost", context.Cause(l.Context()))
	cause := context.Cause(l.Context())
	require.ErrorIs(t, cause, ErrLost, "cause")
	require.ErrorContains(t, cause, "expired", "cause")
	require.Zero(t, c.Exists(ctx, l.key).Val(), "key exists after renewing an expired lease; want it not re-created")
}

// testRenewStolen: a key whose value is not the lease's is neither
// extended nor renewed, and the lease is lost. The thieves include a
// process with our node id (a restarted one: another holder) and, above
// all, our own node and holder with another fence: what an acquire
// attempt whose reply was lost, run by the server after its retry won, or
// a failover that lost a takeover, leaves on the key while the lease is
// live. Renewing on node|holder| alone would keep such a lease held
// forever under a fence the key no longer carries, and every fenced write
// of the room would be refused; lost, the next Acquire takes the room over
// with a fresh fence.
func testRenewStolen(t *testing.T, b backend) {
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	thieves := map[string]func(l *Lease) string{
		"another node":               func(*Lease) string { return "thief|x|1" },
		"our node, other holder":     func(*Lease) string { return m.cfg.Node + "|0123456789abcdef|1" },
		"our holder, another fence":  func(l *Lease) string { return m.prefix + strconv.FormatInt(l.Token()+1, 10) },
		"our value not at the start": func(l *Lease) string { return "x" + l.value },
	}
	for name, thiefOf := range thieves {
		t.Run(name, func(t *testing.T) {
			l, err := m.Acquire(ctx, "stolen-"+strings.NewReplacer(" ", "-", ",", "").Replace(name))
			require.NoError(t, err, "Acquire")
			thief := thiefOf(l)
			c.Set(ctx, l.key, thief, 0)
			require.NoError(t, m.Renew(ctx), "RenewAll")
			cause := context.Cause(l.Context())
			require.ErrorIs(t, cause, ErrLost, "cause")
			require.ErrorContains(t, cause, "taken", "cause: want taken by another holder")
			require.Equal(t, thief, c.Get(ctx, l.key).Val(), "stolen key: want the thief's value")
			require.Negative(t, c.PTTL(ctx, l.key).Val(), "stolen key got a TTL from our renewal; want none")
		})
	}
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
	l = next("after release")
	expireNow(t, c, l.key)
	_ = m.Renew(ctx) // notices the expiry
	l = next("after expiry")
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
}

// testRenewMany spreads leases over every slot owner and renews them in
// one pipeline.
func testRenewMany(t *testing.T, b backend) {
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	var ls []*Lease
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		l, err := m.Acquire(ctx, "many-"+id)
		require.NoError(t, err, "Acquire")
		ls = append(ls, l)
	}
	before := make([]int64, len(ls))
	for i, l := range ls {
		before[i] = l.lastOK.Load()
	}
	require.NoError(t, m.Renew(ctx), "RenewAll")
	for i, l := range ls {
		require.True(t, l.held(), "lease %s: want held", l.label())
		require.Greater(t, l.lastOK.Load(), before[i], "lease %s: want renewed", l.label())
	}
}
