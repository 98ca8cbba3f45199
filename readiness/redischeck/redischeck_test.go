package redischeck_test

import (
	"context"
	"testing"
	"time"

	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/redischeck"
)

func TestPingDefaults(t *testing.T) {
	c := redischeck.Ping(nil)
	if c.Name != "redis" || c.Timeout != 200*time.Millisecond || c.Tier != readiness.Gating {
		t.Errorf("got %s %v %v; want redis 200ms gating", c.Name, c.Timeout, c.Tier)
	}
}

func TestPing(t *testing.T) {
	srv := redistest.Start(t)
	c := redischeck.Ping(srv.Client())
	run := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), c.Timeout)
		defer cancel()
		return c.Probe(ctx)
	}
	if err := run(); err != nil {
		t.Fatalf("PING a running redis-server: %v; want nil", err)
	}
	srv.Kill()
	if err := run(); err == nil {
		t.Errorf("PING a killed redis-server: nil; want an error")
	}
}
