package main

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/examples/room-service/internal/room"
	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/lease"
	"github.com/drainkit/drainkit/lifecycle"
)

// startLeases starts a redis-server and the lease manager of node-a on it,
// with a client configured as the manager wants; both stop at cleanup.
func startLeases(t *testing.T) (*redis.Client, *lease.Manager) {
	t.Helper()
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	m, err := lease.New(rdb, lease.Config{Node: "node-a", Addr: "127.0.0.1:1", TTL: 2 * time.Second})
	require.NoError(t, err)
	require.NoError(t, m.Start(context.Background()))
	t.Cleanup(func() { assert.NoError(t, m.Stop(context.Background())) })
	return rdb, m
}

// The audit line "acquired" is written once per ownership: acquiring a
// room this node holds already (a room whose cell was dropped while its
// lease was still held) returns the same lease and writes none, or the
// end-to-end checker would see the room owned twice at once.
func TestLeaseAdapterAuditsEachOwnershipOnce(t *testing.T) {
	ctx := context.Background()
	_, m := startLeases(t)
	var out bytes.Buffer
	a := leaseAdapter{m, slog.New(slog.NewJSONHandler(&out, nil)), &heldLeases{}}

	first, err := a.Acquire(ctx, "r1")
	require.NoError(t, err)
	again, err := a.Acquire(ctx, "r1")
	require.NoError(t, err)
	assert.Same(t, first, again, "the held lease is returned")
	assert.Equal(t, 1, strings.Count(out.String(), `"event":"acquired"`), out.String())

	require.NoError(t, first.(*lease.Lease).Release(ctx))
	_, err = a.Acquire(ctx, "r1")
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(out.String(), `"event":"acquired"`), "a new ownership after a release is audited: %s", out.String())
}

// What the outbox left is published after the hand-off within a quarter of
// the drain after its delay, so that the Close phase keeps its share, and
// best effort: one room's entry that is no event is logged, and fails no
// drain (the events stay for the room's next owner).
func TestPublishLeftHookIsBoundedAndBestEffort(t *testing.T) {
	ctx := context.Background()
	rdb, m := startLeases(t)
	ob, err := room.NewOutbox(rdb, room.OutboxConfig{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	var out bytes.Buffer
	r := &rooms{outbox: ob, leases: m, log: slog.New(slog.NewJSONHandler(&out, nil))}
	hooks, err := roomHooks(r, config{HandOffMax: 1}, lifecycle.Config{DrainTimeout: 10 * time.Second, DrainDelay: 2 * time.Second})
	require.NoError(t, err)
	i := slices.IndexFunc(hooks, func(h drain.Hook) bool { return h.Name == "outbox.publish_left" })
	require.GreaterOrEqual(t, i, 0, "hooks: %v", hooks)
	assert.Equal(t, drain.Release, hooks[i].Phase)
	assert.Equal(t, 2*time.Second, hooks[i].Timeout, "a quarter of the drain after its delay")

	require.NoError(t, rdb.RPush(ctx, "room:outbox:{r1}", "not an event").Err())
	ob.Notify("r1")
	ob.StopFetching()
	assert.NoError(t, hooks[i].Run(ctx), "best effort")
	assert.Contains(t, out.String(), "events left to the rooms' next owners")
	assert.Contains(t, out.String(), "not an event")
}
