package lease

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/drain"
)

// The process's state closes the gate by itself: the flip is published
// before its listeners (BeginDrain) run, and no acquisition may complete in
// between.
func TestExternalDrainingGate(t *testing.T) {
	b := standalone(t)
	c := b.client()
	var flipped atomic.Bool
	cfg := testConfig()
	cfg.Draining = flipped.Load
	m := startManager(t, c, cfg)
	ctx := context.Background()
	if _, err := m.Acquire(ctx, "before"); err != nil {
		t.Fatalf("Acquire before the flip: %v", err)
	}
	flipped.Store(true)
	if _, err := m.Acquire(ctx, "after"); !errors.Is(err, ErrDraining) {
		t.Fatalf("Acquire after the flip, before BeginDrain: got %v; want ErrDraining", err)
	}
	if !m.draining() {
		t.Error("gateClosed() = false after the flip; want true")
	}
	// The refused Acquire told the renewer, so the heartbeat says draining
	// now rather than at the next renewal round.
	if !isClosed(m.gate) {
		t.Error("Acquire refused by Config.Draining did not close the Manager's own gate; want the renewer told")
	}
	waitFor(t, "heartbeat marked draining", func() bool {
		return c.HGet(ctx, m.nodeKey(), "state").Val() == stateDraining
	})
}

// The hand-off hook closes the gate itself: a Manager whose Config.Draining
// is not set hands no room over to a lease acquired during its hand-off.
func TestHandOffClosesTheGate(t *testing.T) {
	b := standalone(t)
	c := b.client()
	cfg := testConfig()
	m := startManager(t, c, cfg)
	ctx := context.Background()
	if _, err := m.Acquire(ctx, "before"); err != nil {
		t.Fatalf("Acquire before the drain: %v", err)
	}
	handOff, err := m.HandOff(func(context.Context, *Lease) error { return nil }, 1)
	if err != nil {
		t.Fatalf("HandOff: %v", err)
	}
	if err := handOff.Run(ctx); err != nil {
		t.Fatalf("hand-off: %v", err)
	}
	if _, err := m.Acquire(ctx, "during"); !errors.Is(err, ErrDraining) {
		t.Fatalf("Acquire after the hand-off began: got %v; want ErrDraining", err)
	}
}

// A hand-off cut off by its budget before reaching every room must not let
// the Release hook release the rooms it never flushed (invariant 6).
func TestAbandonedHandOffReleasesNothingUnflushed(t *testing.T) {
	b := standalone(t)
	c := b.client()
	cfg := testConfig()
	m := startManager(t, c, cfg)
	ctx := context.Background()
	rooms := []string{"room-0", "room-1", "room-2", "room-3"}
	for _, id := range rooms {
		if _, err := m.Acquire(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	defer close(release)
	hang := func(ctx context.Context, l *Lease) error {
		<-release // a flush that ignores its context
		return nil
	}
	handOff, err := m.HandOff(hang, 1)
	if err != nil {
		t.Fatal(err)
	}
	handOff.Timeout = 100 * time.Millisecond
	m.closeGate()
	rep := drain.Run(ctx, "test", []drain.Hook{handOff, m.ReleaseHook()})
	if h, _ := rep.Hook(handOff.Name); h.Outcome != drain.TimedOut {
		t.Fatalf("hand-off outcome %s; want timeout", h.Outcome)
	}
	for _, id := range rooms {
		pttl, err := c.PTTL(ctx, m.routeKey(id)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if pttl <= 0 {
			t.Errorf("%s: PTTL %v; want the unflushed lease left in Redis to expire", id, pttl)
		}
	}
	if n := len(m.snapshot(false)); n != 0 {
		t.Errorf("manager still holds %d leases after the Release hook; want 0", n)
	}
}

// With Config.HandOff, a lease the hand-off never took (its hook did not
// run) is left to expire by the Release hook, not released unflushed.
func TestReleaseHookLeavesUnflushedWithHandOff(t *testing.T) {
	b := standalone(t)
	c := b.client()
	cfg := testConfig()
	m := startManager(t, c, cfg)
	ctx := context.Background()
	if _, err := m.HandOff(func(context.Context, *Lease) error { return nil }, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, "room-x"); err != nil {
		t.Fatal(err)
	}
	m.closeGate() // the hand-off's hook never runs
	if err := m.releaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	if pttl := c.PTTL(ctx, m.routeKey("room-x")).Val(); pttl <= 0 {
		t.Errorf("room-x PTTL %v; want the unflushed lease left to expire", pttl)
	}
}

// A lease whose renewals have not been confirmed for TTL·2/3 is not
// reported held, even before the renewer (starved, say) has ended it.
func TestHeldDistrustsAnOverdueLease(t *testing.T) {
	b := standalone(t)
	m := startManager(t, b.client(), testConfig())
	l, err := m.Acquire(context.Background(), "room-h")
	if err != nil {
		t.Fatal(err)
	}
	if !l.held() {
		t.Fatal("fresh lease: Held() = false; want true")
	}
	if err := m.stopRenewer(context.Background()); err != nil { // a renewer that stopped getting CPU
		t.Fatal(err)
	}
	l.lastOK.Store(time.Now().Add(-m.lostAfter).UnixNano()) // its last confirmed renewal, TTL·2/3 ago
	if l.held() {
		t.Error("overdue lease: Held() = true; want false")
	}
}

// TestNoAcquireScriptAfterTheFlip: an attempt that failed before the flip
// is not retried after it (invariant 2: no lease is acquired after the
// flip, not even one released right after).
func TestNoAcquireScriptAfterTheFlip(t *testing.T) {
	b := standalone(t)
	var (
		mgr       atomic.Pointer[Manager]
		attempts  atomic.Int32
		afterFlip atomic.Int32
	)
	hook := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if !isAcquire(cmd) {
			return next(ctx, cmd)
		}
		if mgr.Load().draining() {
			afterFlip.Add(1)
		}
		if attempts.Add(1) == 1 {
			mgr.Load().closeGate() // the flip comes while the first attempt is lost
			return context.DeadlineExceeded
		}
		return next(ctx, cmd)
	}}
	c := b.client(hook)
	cfg := testConfig()
	cfg.TTL = 6 * time.Second
	m := startManager(t, c, cfg)
	mgr.Store(m)
	if _, err := m.Acquire(context.Background(), "flip"); !errors.Is(err, ErrDraining) {
		t.Errorf("Acquire across the flip: got %v; want ErrDraining", err)
	}
	if n := afterFlip.Load(); n != 0 {
		t.Errorf("%d acquire scripts sent after the flip; want 0", n)
	}
	if n := c.Exists(context.Background(), m.routeKey("flip")).Val(); n != 0 || len(m.snapshot(false)) != 0 {
		t.Errorf("after the flip: key exists %d, held %d; want neither", n, len(m.snapshot(false)))
	}
}

// HandOff refuses a nil fn when the hook is built, before anything drains.
func TestHandOffRefusesANilFn(t *testing.T) {
	b := standalone(t)
	m := startManager(t, b.client(), testConfig())
	_, err := m.HandOff(nil, 1)
	if err == nil || !strings.Contains(err.Error(), "fn is nil") {
		t.Fatalf("HandOff(nil): got %v; want an error naming fn", err)
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
