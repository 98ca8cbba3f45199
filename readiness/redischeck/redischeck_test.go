package redischeck_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/redischeck"
)

func TestPingDefaults(t *testing.T) {
	c := redischeck.Ping(nil)
	assert.Equal(t, "redis", c.Name)
	assert.Equal(t, 200*time.Millisecond, c.Timeout)
	assert.Equal(t, readiness.Gating, c.Tier)
}

func TestPing(t *testing.T) {
	srv := redistest.Start(t)
	c := redischeck.Ping(srv.Client())
	run := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), c.Timeout)
		defer cancel()
		return c.Probe(ctx)
	}
	require.NoError(t, run(), "PING a running redis-server")
	srv.Kill()
	assert.Error(t, run(), "PING a killed redis-server")
}
