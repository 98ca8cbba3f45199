package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/harness"
)

// An event stream is in the balancer's log when it ends, with its slot and
// the balancer's own timing of it; a command answered 200 is not logged.
func TestHAProxyLogsStreamEnds(t *testing.T) {
	path, err := harness.HAProxyPath()
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
	h, err := harness.StartHAProxy(ctx, path, haproxyConfig(t.TempDir(), frontAddr, []string{ln.Addr().String()}, ""))
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, h.WaitServer(ctx, 0, true))

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
		ends = parseStreamEnds(h.Output())
		if ends == nil {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond): // polling an external process's log
			}
		}
	}
	require.Len(t, ends, 1, "streams in the log:\n%s", h.Output())
	e := ends[0]
	assert.Equal(t, GatewaySlot(0), e.Slot)
	assert.False(t, e.Start.Before(before), "start %s before the request at %s", e.Start, before)
	assert.GreaterOrEqual(t, e.End.Sub(e.Start), held, "the stream lasted")
	assert.False(t, e.End.After(after.Add(stampSlack)), "end %s after the client saw it at %s", e.End, after)
	assert.NotContains(t, h.Output(), "/commands", "a command answered 200 is not logged")
}

// A balancer that fails to start is nil, not a nil pointer in a non-nil
// balancer: Start's clean-up closes a non-nil one, and a nil *HAProxy
// panicked there, hiding why it had failed (here, a directory whose name
// HAProxy cannot take as a socket path: a subtest name with a comma).
func TestAFailedBalancerIsNil(t *testing.T) {
	if _, err := harness.HAProxyPath(); err != nil {
		t.Fatalf("haproxy not found (scripts/test installs it): %v", err)
	}
	dir := t.TempDir() + "/a,b"
	require.NoError(t, os.Mkdir(dir, 0o700))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lb, err := startBalancer(ctx, Config{Balancer: "haproxy", Dir: dir}, "127.0.0.1:1", []string{"127.0.0.1:2"})
	require.Error(t, err, "HAProxy with a socket path it cannot parse")
	if lb != nil { // not assert.Nil, which takes a nil pointer in an interface for nil
		t.Errorf("the balancer of a failed start: got %#v; want nil", lb)
	}
}
