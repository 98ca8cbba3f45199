package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/drain"
)

func TestDrainGate(t *testing.T) {
	b := standalone(t)
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()

	m.closeGate()
	if _, err := m.Acquire(ctx, "after-flip"); !errors.Is(err, ErrDraining) {
		t.Fatalf("Acquire after BeginDrain: got %v; want ErrDraining", err)
	}
	if n := c.Exists(ctx, m.routeKey("after-flip")).Val(); n != 0 {
		t.Fatalf("route key written after the flip; want none")
	}
	waitFor(t, "heartbeat marked draining", func() bool {
		return c.HGet(ctx, m.nodeKey(), "state").Val() == stateDraining
	})
}

// TestDrainRace flips the gate while the acquire script runs: the script
// succeeds, the gate is closed by the time it returns, so the lease is
// released and Acquire returns ErrDraining.
func TestDrainRace(t *testing.T) {
	b := standalone(t)
	var mp atomic.Pointer[Manager]
	flip := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		m := mp.Load()
		if args := cmd.Args(); m != nil && len(args) > 3 && args[3] == m.routeKey("race") {
			m.closeGate() // the flip lands between the script and the registration
		}
		return err
	}}
	c := b.client(flip)
	m := startManager(t, c, testConfig())
	mp.Store(m)
	ctx := context.Background()
	l, err := m.Acquire(ctx, "race")
	if !errors.Is(err, ErrDraining) || l != nil {
		t.Fatalf("Acquire racing the flip: got %v, %v; want nil, ErrDraining", l, err)
	}
	if n := c.Exists(ctx, m.routeKey("race")).Val(); n != 0 {
		t.Fatalf("lease acquired across the flip still in Redis; want released")
	}
	if n := len(m.snapshot(false)); n != 0 {
		t.Fatalf("manager holds %d leases; want 0", n)
	}
}

// TestHandOff flushes rooms with bounded concurrency: flushed rooms are
// released one by one, failed rooms are left to expire, and the release
// hook then deletes the heartbeat last.
func TestHandOff(t *testing.T) {
	b := standalone(t)
	var (
		logMu sync.Mutex
		log   []string // keys of scripts, in the order Redis got them
	)
	record := func(cmd redis.Cmder) {
		if args := cmd.Args(); len(args) > 3 && strings.HasPrefix(cmd.Name(), "eval") {
			logMu.Lock()
			log = append(log, fmt.Sprint(args[3]))
			logMu.Unlock()
		}
	}
	recorder := pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		for _, c := range cmds {
			record(c)
		}
		return next(ctx, cmds)
	}}
	singles := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		record(cmd)
		return next(ctx, cmd)
	}}
	c := b.client(recorder, singles)
	cfg := testConfig()
	m := startManager(t, c, cfg)
	ctx := context.Background()

	leases := map[string]*Lease{}
	for _, id := range []string{"ok-1", "ok-2", "ok-3", "ok-slow", "fail-1", "fail-2"} {
		l, err := m.Acquire(ctx, id)
		if err != nil {
			t.Fatalf("Acquire %s: %v", id, err)
		}
		leases[id] = l
	}
	m.closeGate()

	hook, err := m.HandOff(func(ctx context.Context, l *Lease) error {
		switch {
		case strings.HasPrefix(l.ID(), "fail"):
			return errors.New("snapshot store down")
		case l.ID() == "ok-slow":
			// Rooms move one by one: ok-1 is released while this room is
			// still flushing, not after the slowest room.
			waitFor(t, "ok-1 released during another room's flush", func() bool {
				return c.Exists(ctx, leases["ok-1"].key).Val() == 0
			})
		}
		return nil
	}, 2)
	if err != nil {
		t.Fatalf("HandOff: %v", err)
	}
	if err := hook.Validate(); err != nil || hook.Phase != drain.Flush {
		t.Fatalf("HandOff hook: phase %s, validation %v; want flush, nil", hook.Phase, err)
	}
	err = hook.Run(ctx)
	var he *handOffError
	if !errors.As(err, &he) {
		t.Fatalf("HandOff: got %v; want a *handOffError", err)
	}
	if want := (handOffResult{Released: 4, LeftToExpire: 2}); he.Result != want {
		t.Fatalf("HandOff result %+v; want %+v", he.Result, want)
	}
	for id, l := range leases {
		exists := c.Exists(ctx, l.key).Val() == 1
		if failed := strings.HasPrefix(id, "fail"); exists != failed {
			t.Errorf("room %s: key exists %v; want %v (only failed rooms are left to expire)", id, exists, failed)
		}
		want := ErrReleased
		if strings.HasPrefix(id, "fail") {
			want = ErrLeftToExpire
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, want) {
			t.Errorf("room %s: cause %v; want %v", id, cause, want)
		}
	}

	release := m.ReleaseHook()
	if release.Phase != drain.Release {
		t.Fatalf("ReleaseHook phase %s; want release", release.Phase)
	}
	logMu.Lock()
	log = nil
	logMu.Unlock()
	if err := release.Run(ctx); err != nil {
		t.Fatalf("ReleaseHook: %v", err)
	}
	if n := c.Exists(ctx, m.nodeKey()).Val(); n != 0 {
		t.Fatalf("heartbeat exists after the release hook; want deleted")
	}
	for _, id := range []string{"fail-1", "fail-2"} {
		if n := c.Exists(ctx, leases[id].key).Val(); n != 1 {
			t.Errorf("unflushed room %s released by the release hook; want left to expire", id)
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	if len(log) == 0 || log[len(log)-1] != m.nodeKey() {
		t.Fatalf("scripts during release %v; want the heartbeat last", log)
	}
}

// TestReleaseHookWithoutHandOff releases every lease in one batch, before
// the heartbeat goes.
func TestReleaseHookWithoutHandOff(t *testing.T) {
	b := standalone(t)
	var (
		mu    sync.Mutex
		order []string
	)
	hook := pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		evals, keys := 0, 0
		for _, c := range cmds {
			if strings.HasPrefix(c.Name(), "eval") {
				evals++
				keys += int(c.Args()[2].(int)) // EVALSHA sha numkeys keys...
			}
		}
		if evals > 0 { // not a connection's set-up pipeline
			mu.Lock()
			order = append(order, fmt.Sprintf("pipeline of %d calls, %d keys", evals, keys))
			mu.Unlock()
		}
		return next(ctx, cmds)
	}}
	del := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if args := cmd.Args(); len(args) > 1 && args[1] == heartbeatDeleteScript.Hash() {
			mu.Lock()
			order = append(order, "delete heartbeat")
			mu.Unlock()
		}
		return next(ctx, cmd)
	}}
	c := b.client(hook, del)
	cfg := testConfig()
	cfg.TTL = 30 * time.Second // no renewal round interferes with the order
	m := startManager(t, c, cfg)
	ctx := context.Background()
	var ls []*Lease
	for i := range 5 {
		l, err := m.Acquire(ctx, fmt.Sprintf("batch-%d", i))
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		ls = append(ls, l)
	}
	mu.Lock()
	order = nil
	mu.Unlock()
	if err := m.releaseAll(ctx); err != nil {
		t.Fatalf("releaseAll: %v", err)
	}
	for _, l := range ls {
		if n := c.Exists(ctx, l.key).Val(); n != 0 {
			t.Errorf("%s still in Redis after releaseAll; want released", l.label())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"pipeline of 1 calls, 5 keys", "delete heartbeat"}; !slices.Equal(order, want) {
		t.Fatalf("calls %v; want %v", order, want)
	}
	if _, err := m.Acquire(ctx, "late"); !errors.Is(err, ErrDraining) {
		t.Fatalf("Acquire after releaseAll: got %v; want ErrDraining", err)
	}
}

// TestStopLeavesLeasesToExpire: Stop never releases (rooms may be
// unflushed) but tells holders at once.
func TestStopLeavesLeasesToExpire(t *testing.T) {
	b := standalone(t)
	c := b.client()
	m := startManager(t, c, testConfig())
	ctx := context.Background()
	l, err := m.Acquire(ctx, "stop")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := m.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !isLost(l) {
		t.Fatalf("lease not lost after Stop (cause %v); want lost", context.Cause(l.Context()))
	}
	if n := c.Exists(ctx, l.key).Val(); n != 1 {
		t.Fatalf("lease key deleted by Stop; want left to expire")
	}
	if n := c.Exists(ctx, m.nodeKey()).Val(); n != 0 {
		t.Fatalf("heartbeat exists after Stop; want deleted")
	}
	if _, err := m.Acquire(ctx, "after-stop"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Acquire after Stop: got %v; want ErrNotRunning", err)
	}
}

// A holder that releases its lease after the drain left it to expire (a
// deferred Release in the room's worker, whose context the drain just
// cancelled) must not delete the key: the room was not flushed, and the
// next owner must wait for the TTL. Release used to delete it.
func TestReleaseKeepsALeaseLeftToExpire(t *testing.T) {
	b := standalone(t)
	c := b.client()
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		during bool // a holder also releases while the hand-off flushes the room
	}{{"by the hand-off", false}, {"during the hand-off", true}} {
		t.Run(tt.name, func(t *testing.T) {
			m, l := handOffLease(t, c, strings.ReplaceAll(tt.name, " ", "-"))
			var during, liveAfter error
			hook, err := m.HandOff(func(context.Context, *Lease) error {
				if tt.during { // say, the holder believed the room flushed
					during = l.Release(ctx)
					liveAfter = l.Context().Err() // the hand-off's still
				}
				return errors.New("snapshot store down")
			}, 1)
			if err != nil {
				t.Fatalf("HandOff: %v", err)
			}
			if err := hook.Run(ctx); err == nil {
				t.Fatal("HandOff with a failing flush: got nil; want the room left to expire")
			}
			if tt.during && (!errors.Is(during, ErrDraining) || liveAfter != nil) {
				t.Errorf("Release during the hand-off: got %v, lease context %v; want ErrDraining and the lease still live (the hand-off decides)", during, liveAfter)
			}
			if err := l.Release(ctx); !errors.Is(err, ErrLeftToExpire) {
				t.Errorf("Release after the hand-off left the lease to expire: got %v; want ErrLeftToExpire", err)
			}
			if n := c.Exists(ctx, l.key).Val(); n != 1 {
				t.Errorf("Exists(key of an unflushed room) after a Release: got %d; want 1 (left to expire)", n)
			}
		})
	}
	t.Run("by Stop", func(t *testing.T) {
		m := startManager(t, c, testConfig())
		l, err := m.Acquire(ctx, "stopped")
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		if err := m.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := l.Release(ctx); !errors.Is(err, ErrLeftToExpire) {
			t.Errorf("Release after Stop: got %v; want ErrLeftToExpire", err)
		}
		if n := c.Exists(ctx, l.key).Val(); n != 1 {
			t.Errorf("Exists(key) after Stop and a Release: got %d; want 1 (left to expire)", n)
		}
	})
}

// Once the hand-off has taken a lease, a holder's Release sends nothing,
// also after the hand-off released the lease (a second compare-and-DEL
// racing the hand-off's own could make it count a flushed room as lost)
// and after the lease was lost while the hand-off had it (its key, still
// ours if lost renewal replies kept it alive, must be left to expire).
func TestReleaseAfterTheHandOffTouchesNothing(t *testing.T) {
	b := standalone(t)
	var holderReleases atomic.Int32 // release scripts sent alone, not in the hand-off's pipeline
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if args := cmd.Args(); len(args) > 1 && (args[1] == releaseScript.Hash() || args[1] == releaseSrc) {
			holderReleases.Add(1)
		}
		return next(ctx, cmd)
	}})
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		lose    bool // the lease is lost while its room is flushed
		wantKey int64
	}{{"released by the hand-off", false, 0}, {"lost while the hand-off had it", true, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			m, l := handOffLease(t, c, strings.ReplaceAll(tt.name, " ", "-"))
			hook, err := m.HandOff(func(context.Context, *Lease) error {
				if tt.lose { // renewal overdue: the renewer would end it as lost
					l.lastOK.Store(time.Now().Add(-time.Hour).UnixNano())
					m.expireOverdue(time.Now())
				}
				return nil
			}, 1)
			if err != nil {
				t.Fatalf("HandOff: %v", err)
			}
			_ = hook.Run(ctx) // a lost lease is no hand-off error; its outcome is checked below
			before := holderReleases.Load()
			if err := l.Release(ctx); !errors.Is(err, ErrDraining) {
				t.Errorf("Release after the hand-off: got %v; want ErrDraining (the hand-off decided)", err)
			}
			if n := holderReleases.Load() - before; n != 0 {
				t.Errorf("release scripts sent by the holder's Release: got %d; want 0", n)
			}
			if n := c.Exists(ctx, l.key).Val(); n != tt.wantKey {
				t.Errorf("Exists(key) after the hand-off and a Release: got %d; want %d", n, tt.wantKey)
			}
		})
	}
}

// handOffLease starts a Manager with Config.HandOff on c and acquires id.
func handOffLease(t *testing.T, c redis.UniversalClient, id string) (*Manager, *Lease) {
	t.Helper()
	cfg := testConfig()
	m := startManager(t, c, cfg)
	l, err := m.Acquire(context.Background(), id)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return m, l
}
