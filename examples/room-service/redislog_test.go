package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

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
