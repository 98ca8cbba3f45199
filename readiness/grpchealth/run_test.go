package grpchealth_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/grpchealth"
)

// TestRunServesRecoveryPromptly: once a gating dependency recovers, Run
// serves SERVING within a fifth of CacheTTL (the registry keeps a failing
// evaluation that long) plus a tenth of it (the next poll), not on a later
// tick; and polling faster while NOT_SERVING runs the check no more than
// once per fifth of CacheTTL.
func TestRunServesRecoveryPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry(t, newState(lifecycle.Running))
		ttl := readiness.DefaultCacheTTL // newRegistry leaves it unset
		var down atomic.Bool
		var runs atomic.Int64
		down.Store(true)
		err := reg.Add(readiness.Check{Name: "redis", Tier: readiness.Gating, Probe: func(context.Context) error {
			runs.Add(1)
			if down.Load() {
				return errors.New("connection refused")
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		h := grpchealth.NewServer(reg)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- h.Run(ctx) }()
		status := func() healthpb.HealthCheckResponse_ServingStatus {
			t.Helper()
			st, err := h.Status(t.Context(), "room-service")
			if err != nil {
				t.Fatal(err)
			}
			return st
		}

		// Recover half-way between two evaluations.
		time.Sleep(3*ttl + ttl/2)
		synctest.Wait()
		if got := status(); got != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("dependency down: %s; want NOT_SERVING", got)
		}
		down.Store(false)
		recovered := time.Now()
		for status() != healthpb.HealthCheckResponse_SERVING {
			if time.Since(recovered) > 5*ttl {
				t.Fatalf("still NOT_SERVING %s after the dependency recovered", time.Since(recovered))
			}
			time.Sleep(ttl / 100)
			synctest.Wait()
		}
		if got, want := time.Since(recovered), ttl/5+ttl/10; got > want {
			t.Errorf("SERVING %s after the dependency recovered; want within %s", got, want)
		}
		if got, want := runs.Load(), int64(time.Since(start)/(ttl/5))+1; got > want {
			t.Errorf("check ran %d times in %s; want at most %d (once per fifth of CacheTTL %s)", got, time.Since(start), want, ttl)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v; want nil", err)
		}
	})
}
