package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stallingGateway is a real HTTP server whose /healthz/ready answers 200,
// except that the next n probes get no answer until the prober gives up,
// like a gateway too starved to answer within the balancer's check
// timeout.
type stallingGateway struct {
	mu      sync.Mutex
	stall   int           // probes still to stall
	stalled chan struct{} // receives when a stalled probe was given up
	passed  chan struct{} // receives when a probe was answered 200
}

func (g *stallingGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	stall := g.stall > 0
	if stall {
		g.stall--
	}
	g.mu.Unlock()
	if stall {
		<-r.Context().Done() // HAProxy closes the check at its timeout
		g.stalled <- struct{}{}
		return
	}
	w.WriteHeader(http.StatusOK)
	select {
	case g.passed <- struct{}{}:
	default: // nobody is counting
	}
}

func (g *stallingGateway) setStall(n int) {
	g.mu.Lock()
	g.stall = n
	g.mu.Unlock()
}

// chkdown is how many times HAProxy's health checks took slot's server
// from UP to DOWN.
func chkdown(t *testing.T, h *haproxy, slot int) int {
	t.Helper()
	rows, err := h.stat(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r["pxname"] == "gateways" && r["svname"] == GatewaySlot(slot) {
			n, err := strconv.Atoi(r["chkdown"])
			if err != nil {
				t.Fatalf("chkdown %q: %v", r["chkdown"], err)
			}
			return n
		}
	}
	t.Fatalf("no server gw%d in show stat", slot)
	return 0
}

// TestHAProxyFall: one probe answered too late leaves a gateway in the
// balancer, as the deploy manifests' failureThreshold 2 does; ProbeFall
// in a row take it out.
func TestHAProxyFall(t *testing.T) {
	path, err := haproxyPath()
	if err != nil {
		t.Fatalf("haproxy not found (scripts/test installs it): %v", err)
	}
	g := &stallingGateway{stalled: make(chan struct{}), passed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close(); <-served }()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	frontAddr := front.Addr().String()
	front.Close() // HAProxy binds it
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h, err := startHAProxy(ctx, path, t.TempDir(), frontAddr, []string{ln.Addr().String()}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	if err := h.waitServer(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	base := chkdown(t, h, 0)

	// One late answer, then an answer in time.
	g.setStall(1)
	<-g.stalled
	<-g.passed
	if got := chkdown(t, h, 0) - base; got != 0 {
		t.Errorf("one probe answered late: server taken out %d times; want 0 (fall %d)", got, ProbeFall)
	}

	// ProbeFall late answers in a row.
	g.setStall(ProbeFall)
	for range ProbeFall {
		<-g.stalled
	}
	if err := h.waitServer(ctx, 0, false); err != nil {
		t.Errorf("%d probes in a row answered late: %v", ProbeFall, err)
	}
}

// An event stream is in the balancer's log when it ends, with its slot and
// the balancer's own timing of it; a command answered 200 is not logged.
func TestHAProxyLogsStreamEnds(t *testing.T) {
	path, err := haproxyPath()
	if err != nil {
		t.Fatalf("haproxy not found (scripts/test installs it): %v", err)
	}
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz/ready", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("POST /api/v1/rooms/r/commands", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("GET /api/v1/rooms/r/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		<-release
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close(); <-served }()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	frontAddr := front.Addr().String()
	front.Close() // HAProxy binds it
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h, err := startHAProxy(ctx, path, t.TempDir(), frontAddr, []string{ln.Addr().String()}, "")
	require.NoError(t, err)
	defer h.close()
	require.NoError(t, h.waitServer(ctx, 0, true))

	resp, err := http.Post("http://"+frontAddr+"/api/v1/rooms/r/commands", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	// HAProxy stamps a request with the date its event loop last read,
	// truncated to the millisecond: a request sent at t may read t minus a
	// millisecond and a loop turn. Failed once with a 1 ms allowance
	// (1.46 ms early); the e2e measures windows of 100 ms and more.
	const stampSlack = 10 * time.Millisecond
	before := time.Now().Add(-stampSlack)
	resp, err = http.Get("http://" + frontAddr + "/api/v1/rooms/r/events")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	const held = 300 * time.Millisecond
	<-time.After(held) // the stream's length is the case, not a wait for a condition
	close(release)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	after := time.Now()

	var ends []StreamEnd
	for ends == nil && ctx.Err() == nil {
		ends = parseStreamEnds(h.output())
		if ends == nil {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond): // polling an external process's log
			}
		}
	}
	require.Len(t, ends, 1, "streams in the log:\n%s", h.output())
	e := ends[0]
	assert.Equal(t, GatewaySlot(0), e.Slot)
	assert.False(t, e.Start.Before(before), "start %s before the request at %s", e.Start, before)
	assert.GreaterOrEqual(t, e.End.Sub(e.Start), held, "the stream lasted")
	assert.False(t, e.End.After(after.Add(stampSlack)), "end %s after the client saw it at %s", e.End, after)
	assert.NotContains(t, h.output(), "/commands", "a command answered 200 is not logged")
}
