package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// newCappedAPI is newAPI with the pending cap of cfg, its metrics in reg.
func newCappedAPI(t *testing.T, cfg Config, reg prometheus.Registerer, addrs ...string) *api {
	t.Helper()
	a := startAPI(t, addrs...)
	p, err := newPending(cfg, reg)
	require.NoError(t, err)
	a.pending = p
	return a
}

// blocking is a backend whose Apply signals entered and waits for release.
func blocking(entered chan<- struct{}, release <-chan struct{}) *testRooms {
	return &testRooms{apply: func(ctx context.Context, _ *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		entered <- struct{}{}
		select {
		case <-release:
			return &roompb.ApplyResponse{Status: roompb.ApplyResponse_APPLIED, Seq: 1}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
}

// TestFloodIsShedPastTheCap: with every held request stuck on a backend
// (a fault being waited out), a flood gets 503 at once past the cap, each
// counted; the held ones still complete once the backend answers.
func TestFloodIsShedPastTheCap(t *testing.T) {
	const maxPending, flood = 8, 200
	entered, release := make(chan struct{}, flood), make(chan struct{})
	b := startBackend(t, blocking(entered, release))
	reg := prometheus.NewRegistry()
	a := newCappedAPI(t, Config{MaxPending: maxPending, MaxPendingBytes: DefaultMaxPendingBytes}, reg, b.addr)
	h := a.routes()

	codes := make(chan int, flood)
	var wg sync.WaitGroup
	send := func() {
		wg.Go(func() {
			rec, _ := doWithin(t, h, "20s", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
			codes <- rec.Code
		})
	}
	for range maxPending {
		send()
	}
	for range maxPending {
		<-entered // the cap is full of requests waiting on the backend
	}
	for range flood - maxPending {
		send()
	}
	shed := 0
	for range flood - maxPending { // every one answered while the held ones still wait
		code := <-codes
		require.Equal(t, http.StatusServiceUnavailable, code)
		shed++
	}
	assert.Equal(t, flood-maxPending, shed)
	assert.Equal(t, float64(flood-maxPending), testutil.ToFloat64(a.pending.shed.WithLabelValues("count")))
	assert.Equal(t, float64(maxPending), testutil.ToFloat64(a.pending.held))
	close(release)
	wg.Wait()
	close(codes)
	for code := range codes {
		assert.Equal(t, http.StatusOK, code)
	}
	assert.Equal(t, int64(maxPending), b.rooms.applies.Load(), "only held requests reached the backend")
	assert.Zero(t, testutil.ToFloat64(a.pending.held))
}

// TestByteCapSheds: the byte cap holds one request's accounted cost; a
// second is shed while the first is held, and admitted once it is done.
func TestByteCapSheds(t *testing.T) {
	entered, release := make(chan struct{}, 2), make(chan struct{})
	b := startBackend(t, blocking(entered, release))
	a := newCappedAPI(t, Config{MaxPending: 100, MaxPendingBytes: minPendingBytes + 1024}, prometheus.NewRegistry(), b.addr)
	h := a.routes()
	first := make(chan int, 1)
	go func() {
		rec, _ := doWithin(t, h, "20s", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
		first <- rec.Code
	}()
	<-entered
	rec, got := doWithin(t, h, "20s", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c2","op":"join"}`)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Contains(t, got["error"], "bytes cap")
	assert.Equal(t, 1.0, testutil.ToFloat64(a.pending.shed.WithLabelValues("bytes")))
	close(release)
	assert.Equal(t, http.StatusOK, <-first)
	rec, _ = doWithin(t, h, "20s", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c3","op":"join"}`)
	assert.Equal(t, http.StatusOK, rec.Code, "admitted once the first is done")
}

// A request that accounts for more than the whole byte cap (large
// headers at the least cap) is admitted when nothing else is held: it
// would otherwise be shed every time, a permanent refusal that reads as load.
func TestARequestLargerThanTheByteCapIsAdmittedAlone(t *testing.T) {
	b := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 1)})
	a := newCappedAPI(t, Config{MaxPending: 100, MaxPendingBytes: minPendingBytes}, prometheus.NewRegistry(), b.addr)
	req := httptest.NewRequest("POST", "/api/v1/rooms/r1/commands", strings.NewReader(`{"command_id":"c1","op":"join"}`))
	req.Header.Set("X-Trace", strings.Repeat("t", 4096))
	rec := httptest.NewRecorder()
	a.routes().ServeHTTP(rec, req)
	assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

// TestBackendCallsAreBounded: requests released together (a fault ended)
// reach the backends at most maxBackendCalls at a time, and all complete.
func TestBackendCallsAreBounded(t *testing.T) {
	const requests = maxBackendCalls + 36
	var now, peak atomic.Int64
	entered, release := make(chan struct{}, requests), make(chan struct{})
	b := startBackend(t, &testRooms{apply: func(ctx context.Context, _ *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		n := now.Add(1)
		defer now.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		entered <- struct{}{}
		select {
		case <-release:
			return &roompb.ApplyResponse{Status: roompb.ApplyResponse_APPLIED, Seq: 1}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	a := startAPI(t, b.addr)
	h := a.routes()
	codes := make(chan int, requests)
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			rec, _ := doWithin(t, h, "20s", "POST", "/api/v1/rooms/r1/commands", `{"command_id":"c1","op":"join"}`)
			codes <- rec.Code
		})
	}
	for range maxBackendCalls {
		<-entered
	}
	assert.False(t, a.calls.TryAcquire(1), "every call slot taken")
	close(release)
	wg.Wait()
	close(codes)
	for code := range codes {
		assert.Equal(t, http.StatusOK, code)
	}
	assert.Equal(t, int64(requests), b.rooms.applies.Load())
	assert.LessOrEqual(t, peak.Load(), int64(maxBackendCalls), "got %d calls at once; want at most %d", peak.Load(), maxBackendCalls)
}
