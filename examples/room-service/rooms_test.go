package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/lease"
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
