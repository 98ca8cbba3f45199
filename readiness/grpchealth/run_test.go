package grpchealth_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		require.NoError(t, err)
		start := time.Now()
		status, stop := runServer(t, reg)

		// Recover half-way between two evaluations.
		time.Sleep(3*ttl + ttl/2)
		synctest.Wait()
		require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, status(), "dependency down")
		down.Store(false)
		recovered := time.Now()
		for status() != healthpb.HealthCheckResponse_SERVING {
			require.LessOrEqual(t, time.Since(recovered), 5*ttl, "still NOT_SERVING this long after the dependency recovered")
			time.Sleep(ttl / 100)
			synctest.Wait()
		}
		assert.LessOrEqual(t, time.Since(recovered), ttl/5+ttl/10, "time from the dependency's recovery to SERVING")
		elapsed := time.Since(start)
		assert.LessOrEqual(t, runs.Load(), int64(elapsed/(ttl/5))+1, "check runs in %s: at most once per fifth of CacheTTL %s", elapsed, ttl)
		stop()
	})
}

// With Run as the only prober, a gating dependency that fails is served as
// NOT_SERVING by the first evaluation that begins after it (at most a
// CacheTTL and a poll after the last one) plus a poll: a poll that finds
// the results expired starts the evaluation and answers from the last
// one. Polling once per CacheTTL while SERVING, the new evaluation was read
// a whole CacheTTL later: up to three CacheTTLs from the failure. Tried at
// failures a tenth of CacheTTL apart across two CacheTTLs; the check runs
// still at most once per CacheTTL.
func TestRunServesAFailurePromptly(t *testing.T) {
	ttl := readiness.DefaultCacheTTL // newRegistry leaves it unset
	const roundTrip = 5 * time.Millisecond
	for off := time.Duration(0); off < 2*ttl; off += ttl / 10 {
		synctest.Test(t, func(t *testing.T) {
			reg := newRegistry(t, newState(lifecycle.Running))
			var down atomic.Bool
			var runs atomic.Int64
			require.NoError(t, reg.Add(readiness.Check{Name: "db", Probe: func(context.Context) error {
				runs.Add(1)
				time.Sleep(roundTrip)
				if down.Load() {
					return errors.New("connection refused")
				}
				return nil
			}}))
			start := time.Now()
			status, stop := runServer(t, reg)
			time.Sleep(3*ttl + off)
			synctest.Wait()
			require.Equal(t, healthpb.HealthCheckResponse_SERVING, status(), "dependency up")
			healthyRuns, elapsed := runs.Load(), time.Since(start)
			assert.LessOrEqual(t, healthyRuns, int64(elapsed/ttl)+1, "check runs in %s: at most once per CacheTTL %s", elapsed, ttl)

			down.Store(true)
			failed := time.Now()
			for status() != healthpb.HealthCheckResponse_NOT_SERVING {
				require.LessOrEqual(t, time.Since(failed), 5*ttl, "still SERVING this long after the dependency failed")
				time.Sleep(ttl / 100)
				synctest.Wait()
			}
			assert.LessOrEqual(t, time.Since(failed), ttl+2*ttl/10+roundTrip, "time from the dependency's failure to NOT_SERVING, failing %s after the start", 3*ttl+off)
			stop()
		})
	}
}

// A registry that caches nothing (a CacheTTL of a few nanoseconds, whose
// tenth is zero) must not have Run poll it in a tight loop, running its
// checks back to back: Run polls at most every MinPoll.
func TestRunPollsNoFasterThanTheFloorOnATinyCacheTTL(t *testing.T) {
	tests := []struct {
		name string
		give error // the check's answer
	}{
		{"serving", nil},
		{"not serving", errors.New("connection refused")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1",
					CacheTTL: time.Nanosecond, Logger: quietLogger()}, newState(lifecycle.Running).State)
				require.NoError(t, err, "New")
				t.Cleanup(func() { assert.NoError(t, reg.Close(context.Background()), "Close") })
				ctx, cancel := context.WithCancel(t.Context())
				var runs atomic.Int64
				require.NoError(t, reg.Add(readiness.Check{Name: "redis", Probe: func(context.Context) error {
					if runs.Add(1) == 10_000 {
						cancel() // a spinning Run never lets fake time reach the end of the test: stop it
					}
					return tt.give
				}}))
				h := newServer(t, reg)
				done := make(chan error, 1)
				go func() { done <- h.Run(ctx) }()

				const span = time.Second
				time.Sleep(span)
				cancel()
				assert.NoError(t, <-done, "Run")
				assert.LessOrEqual(t, runs.Load(), int64(span/grpchealth.MinPoll)+1,
					"check runs in %v: want at most one per %v", span, grpchealth.MinPoll)
			})
		})
	}
}

// TestRunServesAtTheFlipToRunning: a starting process answers UNKNOWN, and
// Run, told of the flip to Running by OnTransition, serves SERVING at once
// rather than at its next poll (a tenth of CacheTTL later): a gRPC client
// with health checking routes to the replica as soon as its HTTP readiness
// says ready. Without the wake it took up to that poll, and a test that
// started its load at the HTTP readiness failed RPCs meanwhile.
func TestRunServesAtTheFlipToRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newState(lifecycle.Starting)
		reg := newRegistry(t, st)
		h := newServer(t, reg)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()
		synctest.Wait()
		got, err := h.Status(t.Context(), "room-service")
		require.NoError(t, err)
		require.Equal(t, healthpb.HealthCheckResponse_UNKNOWN, got, "while starting")

		time.Sleep(readiness.DefaultCacheTTL / 20) // between two polls
		st.set(lifecycle.Running)
		flipped := time.Now()
		h.OnTransition(lifecycle.Transition{From: lifecycle.Starting, To: lifecycle.Running})
		synctest.Wait()
		got, err = h.Status(t.Context(), "room-service")
		require.NoError(t, err)
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, got, "at the flip to Running")
		assert.Zero(t, time.Since(flipped), "from the flip to SERVING")

		h.OnTransition(lifecycle.Transition{From: lifecycle.Running, To: lifecycle.Draining})
		got, err = h.Status(t.Context(), "room-service")
		require.NoError(t, err)
		assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, got, "at the flip to Draining")
		assert.NoError(t, <-done, "Run returns once drained")
		cancel()
	})
}

// runServer runs a Server for reg until stop, which checks that Run
// returned nil, and returns the status it serves for room-service.
func runServer(t *testing.T, reg *readiness.Registry) (status func() healthpb.HealthCheckResponse_ServingStatus, stop func()) {
	t.Helper()
	h := newServer(t, reg)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	status = func() healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		st, err := h.Status(t.Context(), "room-service")
		require.NoError(t, err)
		return st
	}
	return status, func() { cancel(); assert.NoError(t, <-done, "Run") }
}
