package lease

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
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
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	l2, err := m.Acquire(ctx, "idem")
	if err != nil {
		t.Fatalf("second Acquire: %v", err)
	}
	if l1 != l2 {
		t.Fatalf("second Acquire returned a new lease %v; want the same %v", l2, l1)
	}
	if l1.ID() != "idem" || l1.Token() <= 0 {
		t.Fatalf("lease ID %q token %d; want idem and a positive token", l1.ID(), l1.Token())
	}
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
	if _, err := m.Acquire(ctx, "retry"); err == nil {
		t.Fatalf("first Acquire: got nil error; want the injected lost reply")
	}
	l, err := m.Acquire(ctx, "retry")
	if err != nil {
		t.Fatalf("retry Acquire: %v", err)
	}
	if got, want := c.Get(ctx, m.routeKey("retry")).Val(), l.value; got != want {
		t.Fatalf("route value %q; want %q", got, want)
	}
}

func testHeld(t *testing.T, b backend) {
	c := b.client()
	a, o := startManager(t, c, testConfig()), startManager(t, c, testConfig())
	ctx := context.Background()
	la, err := a.Acquire(ctx, "held")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	_, err = o.Acquire(ctx, "held")
	var held *heldError
	if !errors.As(err, &held) || !errors.Is(err, ErrHeld) {
		t.Fatalf("other Acquire: got %v; want a *heldError matching ErrHeld", err)
	}
	if held.Node != a.cfg.Node || held.Fence != la.Token() {
		t.Fatalf("heldError node %q fence %d; want %q %d", held.Node, held.Fence, a.cfg.Node, la.Token())
	}

	// A value nobody of us wrote is someone else's: never overwritten.
	key := o.routeKey("garbage")
	c.Set(ctx, key, "not-a-lease", 0)
	_, err = o.Acquire(ctx, "garbage")
	if !errors.As(err, &held) || held.Node != "" {
		t.Fatalf("Acquire over an unparseable value: got %v; want a *heldError with empty Node", err)
	}
	if got := c.Get(ctx, key).Val(); got != "not-a-lease" {
		t.Fatalf("unparseable value became %q; want it untouched", got)
	}
}

// testRenewGone lets a lease expire in Redis: the renewal reports it gone,
// the lease is lost at once and the key is not re-created.
func testRenewGone(t *testing.T, b backend) {
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	l, err := m.Acquire(ctx, "gone")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	expireNow(t, c, l.key)
	if err := m.Renew(ctx); err != nil {
		t.Fatalf("RenewAll: %v", err)
	}
	if !isLost(l) {
		t.Fatalf("lease not lost after the key expired (cause %v); want lost", context.Cause(l.Context()))
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, ErrLost) || !strings.Contains(cause.Error(), "expired") {
		t.Fatalf("cause %v; want ErrLost: expired", cause)
	}
	if n := c.Exists(ctx, l.key).Val(); n != 0 {
		t.Fatalf("key exists after renewing an expired lease; want it not re-created")
	}
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
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			thief := thiefOf(l)
			c.Set(ctx, l.key, thief, 0)
			if err := m.Renew(ctx); err != nil {
				t.Fatalf("RenewAll: %v", err)
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, ErrLost) || !strings.Contains(cause.Error(), "taken") {
				t.Fatalf("cause %v; want ErrLost: taken by another holder", cause)
			}
			if got := c.Get(ctx, l.key).Val(); got != thief {
				t.Fatalf("stolen key became %q; want the thief's value %q", got, thief)
			}
			if pttl := c.PTTL(ctx, l.key).Val(); pttl >= 0 {
				t.Fatalf("stolen key got a TTL %s from our renewal; want none", pttl)
			}
		})
	}
}

func testReleaseOwn(t *testing.T, b backend) {
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()

	mine, err := m.Acquire(ctx, "rel-mine")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := mine.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := c.Exists(ctx, mine.key).Val(); n != 0 {
		t.Fatalf("key exists after Release; want deleted")
	}
	if !errors.Is(context.Cause(mine.Context()), ErrReleased) {
		t.Fatalf("cause after Release %v; want ErrReleased", context.Cause(mine.Context()))
	}

	taken, err := m.Acquire(ctx, "rel-taken")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	c.Set(ctx, taken.key, "other|y|9", 0)
	if err := taken.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release of a taken lease: got %v; want ErrNotHeld", err)
	}
	if got := c.Get(ctx, taken.key).Val(); got != "other|y|9" {
		t.Fatalf("Release deleted or changed another holder's key: %q", got)
	}
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
		if err != nil {
			t.Fatalf("%s: Acquire: %v", step, err)
		}
		if l.Token() <= last {
			t.Fatalf("%s: fence %d; want above %d", step, l.Token(), last)
		}
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
	if _, err := m.Owner(ctx, "owner"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Owner of a free room: got %v; want ErrNotHeld", err)
	}
	l, err := m.Acquire(ctx, "owner")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	got, err := m.Owner(ctx, "owner")
	want := Owner{Node: m.cfg.Node, Addr: m.cfg.Addr, Fence: l.Token()}
	if err != nil || got != want {
		t.Fatalf("Owner = %+v, %v; want %+v, nil", got, err, want)
	}
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
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		ls = append(ls, l)
	}
	before := make([]int64, len(ls))
	for i, l := range ls {
		before[i] = l.lastOK.Load()
	}
	if err := m.Renew(ctx); err != nil {
		t.Fatalf("RenewAll: %v", err)
	}
	for i, l := range ls {
		if !l.held() || l.lastOK.Load() <= before[i] {
			t.Fatalf("lease %s held=%v renewed=%v; want held and renewed", l.label(), l.held(), l.lastOK.Load() > before[i])
		}
	}
}
