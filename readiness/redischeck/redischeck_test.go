package redischeck_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/redischeck"
)

func TestPingDefaults(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer client.Close()
	c := redischeck.Ping(client)
	assert.Equal(t, "redis", c.Name)
	assert.Equal(t, 200*time.Millisecond, c.Timeout)
	assert.Equal(t, readiness.Gating, c.Tier)
}

// A check of no client panics where it is made, naming the argument: its
// probe would otherwise panic at every probe, readiness 503 for good.
func TestPingOfNoClientPanics(t *testing.T) {
	for _, c := range []redis.UniversalClient{nil, (*redis.Client)(nil), (*redis.ClusterClient)(nil)} {
		assert.PanicsWithValue(t, "redischeck: Ping: client is nil", func() { redischeck.Ping(c) }, "Ping(%#v)", c)
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
	require.NoError(t, run(), "PING a running redis-server")
	srv.Kill()
	assert.Error(t, run(), "PING a killed redis-server")
}

// A PING to a hung server ends with the probe's context even when the
// client's own options would let it wait forever (no ContextTimeoutEnabled,
// no socket deadline): the server stays paused until the probe returned.
func TestPingEndsWithItsContextOnAHungServer(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: srv.Username, Password: srv.Password,
		ReadTimeout: -1, WriteTimeout: -1})
	defer client.Close()
	c := redischeck.Ping(client)
	require.NoError(t, c.Probe(t.Context()), "PING a running redis-server")
	srv.Pause()
	defer srv.Resume()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), c.Timeout)
		defer cancel()
		done <- c.Probe(ctx)
	}()
	select {
	case err := <-done:
		assert.Error(t, err, "PING a paused redis-server")
	case <-time.After(time.Minute): // a bound on a hang, not a wait for a condition
		srv.Resume() // let the PING end, so the goroutine above does too
		t.Fatalf("Probe still running a minute after its %s timeout; want it to end with its context", c.Timeout)
	}
}

// A caller may raise the check's Timeout (a Redis further away): the PING
// then has that long, not DefaultTimeout, on a client Ping bounds itself
// (no ContextTimeoutEnabled, no socket deadline). The clone it made had a
// fixed 200 ms socket deadline, so every PING slower than that failed.
func TestPingHasTheTimeoutTheCallerSet(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: srv.Username, Password: srv.Password,
		ReadTimeout: -1, WriteTimeout: -1, MaxRetries: -1}) // no retry to land after the pause
	defer client.Close()
	c := redischeck.Ping(client)
	c.Timeout = 5 * time.Second
	require.NoError(t, c.Probe(t.Context()), "PING a running redis-server") // connected
	// The server holds every client's commands for 400 ms: the PING is
	// answered after that, past DefaultTimeout and well inside c.Timeout.
	require.NoError(t, srv.Client().Do(t.Context(), "CLIENT", "PAUSE", 400, "ALL").Err())
	ctx, cancel := context.WithTimeout(t.Context(), c.Timeout)
	defer cancel()
	start := time.Now()
	assert.NoError(t, c.Probe(ctx), "a PING answered after %v, with a %v Timeout", time.Since(start), c.Timeout)
}

// After a primary of a Cluster with replicas is killed and its replica
// promoted, the probe passes every time again: without a reload of the
// client's slot map it would reach the dead primary on every third PING
// for up to a minute, and readiness would flap.
func TestPingFollowsAClusterFailover(t *testing.T) {
	cl := redistest.StartClusterWith(t, redistest.ClusterConfig{Replicas: 1, NodeTimeout: time.Second})
	c := cl.ClientWith(&redis.ClusterOptions{MaxRetries: 1, ContextTimeoutEnabled: true})
	check := redischeck.Ping(c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, check.Probe(ctx), "before the failover")
	cl.Failover(ctx, cl.Servers[0])

	var results []error
	for passed := 0; passed < 6; {
		require.Less(t, len(results), 12, "probes after the failover: %v; want 6 in a row passing", results)
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		err := check.Probe(pctx)
		pcancel()
		results = append(results, err)
		if passed++; err != nil {
			passed = 0
		}
	}
}
