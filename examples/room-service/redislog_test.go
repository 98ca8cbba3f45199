package main

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/internal/testlog"
)

// During an outage go-redis logs every failed dial of every pooled
// connection: one line per format every redisLogEvery, the next saying
// how many were left out, so a failover is a few lines, not a flood.
func TestRedisLogWritesAFormatOncePerWindow(t *testing.T) {
	var logs testlog.Buffer
	l := newRedisLog(slog.New(slog.NewJSONHandler(&logs, nil)), redisTarget{})
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	ctx := context.Background()
	for i := range 100 {
		l.Printf(ctx, "redis: failed to dial after %d attempts: %v", i, "connection refused")
	}
	l.Printf(ctx, "redis: connection pool: %v", "closed") // another format: its own line
	now = now.Add(redisLogEvery)
	l.Printf(ctx, "redis: failed to dial after %d attempts: %v", 5, "connection refused")
	out := logs.String()
	assert.Equal(t, 2, strings.Count(out, "failed to dial"), out)
	assert.Equal(t, 1, strings.Count(out, "connection pool"), out)
	assert.Contains(t, out, `"left_out_since_last":99`)
}

// connectedReplicas reads the primary's replica count, which
// warnFewReplicas compares with REDIS_WAIT_REPLICAS at start.
func TestConnectedReplicas(t *testing.T) {
	primary := redistest.Start(t)
	ctx := context.Background()
	n, known := connectedReplicas(ctx, primary.Client())
	require.True(t, known, "INFO replication read")
	assert.Equal(t, 0, n, "replicas of a lone server")
	redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	require.Eventually(t, func() bool {
		n, known := connectedReplicas(ctx, primary.Client())
		return known && n == 1
	}, 10*time.Second, 10*time.Millisecond, "a replica counted once it connects")
}
