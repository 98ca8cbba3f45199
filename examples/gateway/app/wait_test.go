package app

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/connectivity"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// TestNoReadyBackendIsWaitedOut: while every backend is NOT_SERVING (as
// every room-service is while Redis is down) a request waits for one to
// turn SERVING instead of failing.
func TestNoReadyBackendIsWaitedOut(t *testing.T) {
	b := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 3)})
	b.setServing(false)
	a := startAPI(t, b.addr)
	// round_robin with health checking reports TRANSIENT_FAILURE once it
	// has seen the only backend NOT_SERVING: from then on no backend is ready.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := a.b.conn()
	for s := conn.GetState(); s != connectivity.TransientFailure; s = conn.GetState() {
		require.True(t, conn.WaitForStateChange(ctx, s), "balanced connection stuck in %s", s)
	}
	entered, done := joinInBackground(t, a)
	<-entered // the request is in the gateway while no backend is ready
	b.setServing(true)
	ans := <-done
	require.Equal(t, http.StatusOK, ans.code, "%v", ans.got)
	assert.Equal(t, map[string]any{"status": "applied", "seq": 3.0}, ans.got)
	assert.Equal(t, int64(1), b.rooms.applies.Load(), "one call, once a backend was ready")
}

// TestNoConnectableBackendIsWaitedOut: while no backend accepts a
// connection, a request waits for one to come up (wait-for-ready) within
// its deadline.
func TestNoConnectableBackendIsWaitedOut(t *testing.T) {
	addr := deadAddr(t)
	a := startAPI(t, addr)
	entered, done := joinInBackground(t, a)
	<-entered // the request is in the gateway while nothing listens at addr
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err, "the address freed by deadAddr was taken meanwhile")
	b := serveBackend(t, ln, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 3)})
	ans := <-done
	require.Equal(t, http.StatusOK, ans.code, "%v", ans.got)
	assert.Equal(t, map[string]any{"status": "applied", "seq": 3.0}, ans.got)
	assert.Equal(t, int64(1), b.rooms.applies.Load())
}

// answer is what a request sent in the background got.
type answer struct {
	code int
	got  map[string]any
}

// joinInBackground sends a join of room r1 through a's routes with a 20 s
// deadline; entered is closed once the request is inside the gateway, and
// done receives its answer.
func joinInBackground(t *testing.T, a *api) (entered <-chan struct{}, done <-chan answer) {
	in := make(chan struct{})
	api := a.routes()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(in)
		api.ServeHTTP(w, r)
	})
	out := make(chan answer, 1)
	go func() {
		rec, got := doWithin(t, h, "20s", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
		out <- answer{rec.Code, got}
	}()
	return in, out
}

// deadAddr is a loopback address that refuses connections.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestCrashedOwnerIsLookedUpAgain: a REDIRECT names an owner that refuses
// connections (it crashed; its lease has not expired yet). The gateway
// asks again, with backoff, until the room has a live owner: here, after
// three redirects, the node asked takes the room over itself.
func TestCrashedOwnerIsLookedUpAgain(t *testing.T) {
	dead := deadAddr(t)
	var calls atomic.Int64
	first := startBackend(t, &testRooms{apply: func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		if calls.Add(1) <= 3 {
			return redirectTo("crashed", dead)(ctx, req)
		}
		return applyAnswer(roompb.ApplyResponse_APPLIED, 6)(ctx, req)
	}})
	a := startAPI(t, first.addr)
	rec, got := do(t, a.routes(), "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, map[string]any{"status": "applied", "seq": 6.0}, got)
	assert.Equal(t, int64(4), first.rooms.applies.Load(), "three lookups naming the crashed owner, then the take-over")
	// The retries made on the client's behalf are counted, beside the answer it got.
	assert.Equal(t, 3.0, testutil.ToFloat64(a.retries.WithLabelValues("refused")), "attempts sent again after a refusal")
	assert.Equal(t, 0.0, testutil.ToFloat64(a.retries.WithLabelValues("unknown")))
}

// TestRedirectLoopIsARefusal: a room that keeps moving is waited out like
// any refusal, and at the deadline the client learns nothing was applied.
func TestRedirectLoopIsARefusal(t *testing.T) {
	var bAddr atomic.Pointer[string]
	a := startBackend(t, &testRooms{apply: func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		return redirectTo("b", *bAddr.Load())(ctx, req)
	}})
	b := startBackend(t, &testRooms{apply: redirectTo("a", a.addr)})
	bAddr.Store(&b.addr)
	h := startAPI(t, a.addr).routes()
	rec, got := doWithin(t, h, "300ms", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Contains(t, got["error"], "still moving")
}
