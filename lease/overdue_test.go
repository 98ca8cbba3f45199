package lease

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// fencedWrite is storage that remembers the highest token it has seen and
// refuses lower ones, as [Lease.Token]'s doc asks of storage.
var fencedWrite = redis.NewScript(`
local top = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < top then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1`)

// TestAcquireEndsOverdueLease re-acquires a room whose lease is overdue
// while the renewer has not yet noticed (it is starved of CPU, say): the
// old lease must end, lost, before the new one is handed out, so its
// holder can no longer write with the old token.
func TestAcquireEndsOverdueLease(t *testing.T) {
	b := standalone(t)
	c := b.client()
	cfg := testConfig()
	// The renewer's first wake is a minute away: nothing but Acquire can
	// end the old lease within this test.
	cfg.TTL, cfg.RenewInterval = 3*time.Minute, time.Minute
	m := startManager(t, c, cfg)
	ctx := context.Background()
	old, err := m.Acquire(ctx, "overdue")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	// write is what a holder does: write only while its lease's context
	// is live, with the lease's token.
	write := func(l *Lease) bool {
		if l.Context().Err() != nil {
			return false
		}
		ok, err := fencedWrite.Run(ctx, c, []string{"store:{overdue}"}, l.Token()).Int()
		if err != nil {
			t.Fatalf("fenced write: %v", err)
		}
		return ok == 1
	}
	if !write(old) {
		t.Fatal("write with the fresh lease refused; want accepted")
	}
	old.lastOK.Store(time.Now().Add(-m.lostAfter).UnixNano()) // renewals failing for TTL·2/3

	cur, err := m.Acquire(ctx, "overdue")
	if err != nil {
		t.Fatalf("Acquire of the overdue room: %v", err)
	}
	if cur == old || cur.Token() <= old.Token() {
		t.Fatalf("re-acquired lease %v; want a new lease with a token above %d", cur, old.Token())
	}
	if write(old) {
		t.Error("old holder wrote with token after the room was re-acquired; want refused")
	}
	if !isLost(old) {
		t.Error("old lease: not lost after the room was re-acquired; want lost")
	}
	if cause := context.Cause(old.Context()); !errors.Is(cause, ErrLost) {
		t.Errorf("old lease: cause %v; want ErrLost", cause)
	}
	if !write(cur) {
		t.Error("write with the new lease refused; want accepted")
	}
	if write(old) {
		t.Error("old holder wrote after the new holder; want refused")
	}
	if held := m.snapshot(false); len(held) != 1 || held[0] != cur {
		t.Errorf("Held() = %v; want only %v", held, cur)
	}
}

// A lease given up because no renewal was confirmed says how long it has
// been since the last confirmed one, with the limit beside it: the limit
// alone (TTL·2/3) read as if that much time had passed.
func TestOverdueLeaseSaysTheTimeSinceItsLastRenewal(t *testing.T) {
	b := standalone(t)
	cfg := testConfig()
	cfg.TTL, cfg.RenewInterval = 3*time.Minute, time.Minute // the renewer stays asleep in this test
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	m, err := New(b.client(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// The Manager's clock, fixed from a moment on so the figure is exact.
	var fixed atomic.Int64
	m.now = func() time.Time {
		if n := fixed.Load(); n != 0 {
			return time.Unix(0, n)
		}
		return time.Now()
	}
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	old, err := m.Acquire(ctx, "late")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	// Renewals failing for 5m15s, well past the 2m limit.
	now := time.Now()
	fixed.Store(now.UnixNano())
	old.lastOK.Store(now.Add(-5*time.Minute - 15*time.Second).UnixNano())
	if _, err := m.Acquire(ctx, "late"); err != nil {
		t.Fatalf("Acquire of the overdue room: %v", err)
	}
	const want = "no renewal confirmed for 5m15s (limit 2m0s, TTL·2/3)"
	if cause := context.Cause(old.Context()); cause == nil || !strings.Contains(cause.Error(), want) {
		t.Errorf("old lease: got cause %v; want one containing %q", cause, want)
	}
	if !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant a lease lost line containing %q", logs.String(), want)
	}
}
