package app

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/lifecycle"
)

// TestFloodWhileBackendUnavailable: the whole gateway, over real HTTP,
// while its only room-service is not SERVING (a fault the gateway waits
// out), gets far more concurrent commands than MAX_PENDING. The first
// MAX_PENDING are held; every other one gets 503 at once, counted in
// gateway_requests_shed_total; the number held never exceeds the cap; and
// the heap grows by no more than MAX_PENDING_BYTES, the memory the cap
// promises to bound. Once room-service serves again the held commands
// are applied, and only they reach it.
func TestFloodWhileBackendUnavailable(t *testing.T) {
	const (
		maxPending = 32
		flood      = 10 * maxPending
		// Every request's deadline: the excess must be answered long
		// before it, the held ones must still be waiting when the flood
		// has been answered.
		deadline = 20 * time.Second
	)
	// The byte cap as MAX_PENDING requests of the largest accounted cost,
	// so that the count cap is the one reached, and the heap bound below
	// is the byte cap itself.
	maxBytes := int64(maxPending * minPendingBytes)

	b := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 1)})
	b.setServing(false)
	addr := startFloodApp(t, Config{HTTPAddr: "127.0.0.1:0", Backends: []string{b.addr},
		RequestTimeout: deadline, MaxPending: maxPending, MaxPendingBytes: maxBytes})
	// Registered after the app, so it runs before the app's drain: the
	// held requests finish, whatever the test's outcome.
	t.Cleanup(func() { b.setServing(true) })

	// The runtime keeps the descriptor of every goroutine that ever ran
	// (about 400 B each) for reuse and never frees it; the flood runs a
	// client and a server goroutine per request. Running as many
	// goroutines at once before the baseline keeps that pool, which no
	// cap of the gateway's can govern, out of the measured growth.
	runGoroutines(2 * (flood + maxPending))
	base := heapAfterGC()

	// The held requests: each on its own connection, waiting for a
	// backend that is not SERVING.
	held := make([]*rawRequest, maxPending)
	for i := range held {
		held[i] = sendRaw(t, addr, fmt.Sprintf("held-%d", i), deadline)
	}
	t.Cleanup(func() {
		for _, r := range held {
			_ = r.conn.Close() // answer closed it already unless the test failed before
		}
	})
	waitForMetric(t, addr, "gateway_requests_pending", maxPending)
	heldGoroutines := runtime.NumGoroutine()

	// The flood, all at once.
	var wg sync.WaitGroup
	results := make(chan floodAnswer, flood)
	for i := range flood {
		wg.Go(func() {
			r := sendRaw(t, addr, fmt.Sprintf("flood-%d", i), deadline)
			results <- r.answer(deadline / 2)
		})
	}
	wg.Wait()
	close(results)
	var slowest time.Duration
	for r := range results {
		require.NoError(t, r.err, "a flood request got no answer within half its deadline: it was held, not shed")
		assert.Equal(t, http.StatusServiceUnavailable, r.code, "body %s", r.body)
		assert.Equal(t, "1", r.retryAfter, "Retry-After")
		assert.Contains(t, r.body, "count cap", "shed by the count cap, not a deadline")
		slowest = max(slowest, r.took)
	}
	t.Logf("%d requests shed, the slowest answered after %s (deadline %s)", flood, slowest, deadline)

	// Every shed request has its answer and its connection is closed by
	// the client; once the server's goroutines for them have seen that and
	// ended, the heap holds the held requests and no more.
	waitForGoroutines(t, heldGoroutines)
	grown := heapAfterGC() - base
	t.Logf("heap grew by %d B with %d requests held (%d B each); MAX_PENDING_BYTES %d", grown, maxPending, grown/maxPending, maxBytes)
	assert.LessOrEqual(t, grown, maxBytes, "got %d B of heap growth; want at most MAX_PENDING_BYTES %d", grown, maxBytes)
	m := scrape(t, addr)
	assert.Equal(t, float64(flood), m[`gateway_requests_shed_total{cap="count"}`], "shed counted")
	assert.Equal(t, float64(maxPending), m["gateway_requests_pending"], "held at the end of the flood")
	assert.Zero(t, b.rooms.applies.Load(), "nothing reached the backend while it was not SERVING")

	b.setServing(true)
	for i, r := range held {
		a := r.answer(deadline)
		require.NoError(t, a.err, "held request %d", i)
		assert.Equal(t, http.StatusOK, a.code, "held request %d: %s", i, a.body)
	}
	// Every request the gateway admitted was held until now and reached
	// the backend once: so at most MAX_PENDING were ever held.
	assert.Equal(t, int64(maxPending), b.rooms.applies.Load(), "got %d commands admitted; want the cap, %d", b.rooms.applies.Load(), maxPending)
	waitForMetric(t, addr, "gateway_requests_pending", 0)
}

// startFloodApp runs the whole gateway app in process with cfg, as main
// does, and returns its HTTP address; it is drained at the end of the
// test and must exit cleanly.
func startFloodApp(t *testing.T, cfg Config) string {
	t.Helper()
	lcfg := lifecycle.Config{Service: DefaultService, NodeID: "gw-flood", DrainTimeout: cfg.RequestTimeout + 5*time.Second}
	listening := make(chan string, 1)
	app := fxmoduletest.Start(t, options(lcfg, cfg, quiet(), func(a string) { listening <- a })...)
	t.Cleanup(func() {
		if r := app.Stop(); r.ExitCode != lifecycle.ExitClean {
			t.Errorf("gateway exit code %d; want %d", r.ExitCode, lifecycle.ExitClean)
		}
	})
	return <-listening
}

// heapAfterGC is the live heap after a full collection.
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC() // the second empties what sync.Pools kept from the first
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// runGoroutines runs n goroutines at once and returns when all have
// ended.
func runGoroutines(n int) {
	var started, wg sync.WaitGroup
	release := make(chan struct{})
	started.Add(n)
	for range n {
		wg.Go(func() {
			started.Done()
			<-release
		})
	}
	started.Wait()
	close(release)
	wg.Wait()
}

// waitForGoroutines waits, bounded, until no more than n goroutines run.
func waitForGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			t.Fatalf("got %d goroutines after the flood was answered; want at most %d (the held requests')", runtime.NumGoroutine(), n)
		}
		time.Sleep(5 * time.Millisecond) // polling the server goroutines' exit, bounded above
	}
}

// rawRequest is a command sent on a plain TCP connection, so that the
// client side adds next to nothing to the process's heap (no transport,
// no connection pool, a small read buffer): the heap measured is the
// gateway's.
type rawRequest struct {
	conn net.Conn
	sent time.Time
}

type floodAnswer struct {
	code             int
	retryAfter, body string
	took             time.Duration
	err              error
}

// sendRaw sends a command on a connection of its own; the caller reads
// the answer (which closes the connection) or closes it.
func sendRaw(t *testing.T, addr, commandID string, timeout time.Duration) *rawRequest {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	body := `{"command_id":"` + commandID + `","op":"join"}`
	req := "POST /api/v1/rooms/r1/commands HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n" +
		TimeoutHeader + ": " + timeout.String() + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	r := &rawRequest{conn: conn, sent: time.Now()}
	if _, err := io.WriteString(conn, req); err != nil {
		_ = conn.Close()
		require.NoError(t, err)
	}
	return r
}

// answer reads the response, waiting at most within, and closes the
// connection.
func (r *rawRequest) answer(within time.Duration) floodAnswer {
	defer r.conn.Close()
	if err := r.conn.SetReadDeadline(r.sent.Add(within)); err != nil {
		return floodAnswer{err: err}
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(r.conn, 512), nil)
	if err != nil {
		return floodAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return floodAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(b),
		took: time.Since(r.sent), err: err}
}

// scrape reads the gateway's /metrics into sample name (with labels) →
// value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err, "metric line %q", line)
		m[name] = f
	}
	return m
}

// waitForMetric scrapes until name reads want, bounded: the requests
// just sent reach the gateway's handler asynchronously.
func waitForMetric(t *testing.T, addr, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := scrape(t, addr)[name]
		if got == want || time.Now().After(deadline) {
			require.Equal(t, want, got, "%s", name)
			return
		}
		time.Sleep(5 * time.Millisecond) // polling another server's state, bounded above
	}
}
