package harness

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// balancer is what the tests need of HAProxy and InProcess alike.
type balancer interface {
	Addr() string
	WaitServer(ctx context.Context, i int, up bool) error
	Retries() int
	Close()
}

// serveHTTP serves h on a free loopback port until the test ends.
func serveHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-served })
	return ln.Addr().String()
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	var p Ports
	t.Cleanup(p.Close) // reserved until then: the kernel hands it to nothing else
	a, err := p.Pick(1)
	require.NoError(t, err)
	return a[0]
}

func startBalancer(t *testing.T, kind string, servers []Server) balancer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	switch kind {
	case "haproxy":
		path, err := HAProxyPath()
		require.NoError(t, err, "haproxy not found (scripts/test installs it)")
		h, err := StartHAProxy(ctx, path, HAProxyConfig{Front: deadAddr(t), Servers: servers, Dir: t.TempDir()})
		require.NoError(t, err)
		return h
	default:
		b, err := StartInProcess(servers, "", "")
		require.NoError(t, err)
		return b
	}
}

// Both balancers retry a request whose connection was refused, on another
// server, and never retry a server's 5xx: the server that answered 500
// saw every request exactly once, and the client got its 500.
func TestBalancerRetriesRefusedConnectionsNever5xx(t *testing.T) {
	for _, kind := range []string{"haproxy", "inprocess"} {
		t.Run(kind, func(t *testing.T) {
			var work atomic.Int64
			mux := http.NewServeMux()
			mux.HandleFunc("GET /healthz/ready", func(http.ResponseWriter, *http.Request) {})
			mux.HandleFunc("GET /work", func(w http.ResponseWriter, _ *http.Request) {
				work.Add(1)
				http.Error(w, "boom", http.StatusInternalServerError)
			})
			failing := serveHTTP(t, mux)
			// refusing passes its checks (they go to failing's port) but
			// refuses every request.
			servers := []Server{{Name: "failing", Addr: failing}, {Name: "refusing", Addr: deadAddr(t), CheckAddr: failing}}
			b := startBalancer(t, kind, servers)
			defer b.Close()
			for i := range servers {
				require.NoError(t, b.WaitServer(t.Context(), i, true))
			}

			client := NewClient(nil)
			const n = 10
			for range n {
				resp, err := client.Get("http://" + b.Addr() + "/work")
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusInternalServerError, resp.StatusCode, "the server's 500 reaches the client")
			}
			assert.Equal(t, int64(n), work.Load(), "requests the 500 server saw; want each once (a 5xx is never retried)")
			assert.Positive(t, b.Retries(), "refused connections retried on the other server")
		})
	}
}

// A server leaves the balancer after ProbeFall failed probes in a row and
// comes back after one success; a server with nothing listening is down.
func TestBalancerFollowsProbes(t *testing.T) {
	for _, kind := range []string{"haproxy", "inprocess"} {
		t.Run(kind, func(t *testing.T) {
			var ready atomic.Bool
			ready.Store(true)
			addr := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if !ready.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			b := startBalancer(t, kind, []Server{{Name: "s0", Addr: addr}, {Name: "s1", Addr: deadAddr(t)}})
			defer b.Close()
			require.NoError(t, b.WaitServer(t.Context(), 0, true))
			require.NoError(t, b.WaitServer(t.Context(), 1, false))
			ready.Store(false)
			require.NoError(t, b.WaitServer(t.Context(), 0, false))
			ready.Store(true)
			require.NoError(t, b.WaitServer(t.Context(), 0, true))
		})
	}
}

// A request no server could take, whose target is "*", gets the
// in-process balancer's 400 rather than a panic in its handler.
func TestInProcessAnswersAnAsteriskTarget(t *testing.T) {
	addr := serveHTTP(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	b := startBalancer(t, "inprocess", []Server{{Name: "s0", Addr: addr}})
	defer b.Close()
	require.NoError(t, b.WaitServer(t.Context(), 0, true))
	conn, err := net.Dial("tcp", b.Addr())
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "an answer, not a connection closed by a panic")
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// Endpoints sends each connection to the next endpoint that is in, never
// retries, and refuses when none is.
func TestEndpoints(t *testing.T) {
	a := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "a") }))
	b := serveHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "b") }))
	dead := deadAddr(t)
	var e Endpoints
	client := NewClient(e.DialContext)
	get := func() (string, error) {
		resp, err := client.Get("http://service/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}

	_, err := get()
	assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "no endpoints: got %v; want connection refused", err)

	e.Add(a)
	e.Add(b)
	seen := map[string]int{}
	for range 4 {
		body, err := get()
		require.NoError(t, err)
		seen[body]++
	}
	assert.Equal(t, map[string]int{"a": 2, "b": 2}, seen, "round robin")

	e.RemoveAt(a, time.Now())
	e.RemoveAt(b, time.Now().Add(time.Hour))
	assert.Equal(t, []string{b}, e.Current(), "a left at its instant, b has not yet")
	for range 2 {
		body, err := get()
		require.NoError(t, err)
		assert.Equal(t, "b", body)
	}

	e.Add(dead) // in, and refusing: the client sees it
	refused := 0
	for range 2 {
		if _, err := get(); errors.Is(err, syscall.ECONNREFUSED) {
			refused++
		}
	}
	assert.Equal(t, 1, refused, "one of two connections went to the refusing endpoint, and was not retried")
}

// A server that resets the connection in the middle of its answer: the
// client sees a failure through either balancer, as it would without one.
// The in-process one had sent the status and ended the body cleanly, so a
// drain that cut answers short passed the drill.
func TestAResetMidAnswerReachesTheClient(t *testing.T) {
	for _, kind := range []string{"haproxy", "inprocess"} {
		t.Run(kind, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("GET /healthz/ready", func(http.ResponseWriter, *http.Request) {})
			mux.HandleFunc("GET /work", func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, "partial ")
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler) // the connection closes without the last chunk
			})
			b := startBalancer(t, kind, []Server{{Name: "s", Addr: serveHTTP(t, mux)}})
			defer b.Close()
			require.NoError(t, b.WaitServer(t.Context(), 0, true))
			resp, err := NewClient(nil).Get("http://" + b.Addr() + "/work")
			if err != nil {
				return // broken off before the status: a failure too
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.True(t, err != nil || resp.StatusCode >= 400, "got %d %q and no error; want the reset to reach the client", resp.StatusCode, body)
		})
	}
}
