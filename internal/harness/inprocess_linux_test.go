package harness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request whose client left while the balancer was still connecting to a
// server is not retried on another: that dial ended because of the client,
// not the server, and counting it as a refused connection would credit the
// balancer with retries the service never needed. (net/http reports the
// request's own context error there, not the dial's, so the balancer's
// "refused before anything was sent" test does not match it.)
func TestInProcessDoesNotRetryForAClientThatLeft(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz/ready", func(http.ResponseWriter, *http.Request) {})
	checks := serveHTTP(t, mux)
	hanging := hangingAddr(t)
	servers := []Server{{Name: "a", Addr: hanging, CheckAddr: checks}, {Name: "b", Addr: hanging, CheckAddr: checks}}
	b, err := StartInProcess(servers, "", "")
	require.NoError(t, err)
	closeBalancer := sync.OnceFunc(b.Close)
	defer closeBalancer()
	for i := range servers {
		require.NoError(t, b.WaitServer(t.Context(), i, true))
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.Addr()+"/work", nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		resp, err := NewClient(nil).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return connecting(t, hanging) }, 10*time.Second, time.Millisecond, "the balancer connects to a server")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	closeBalancer() // waits for the balancer's handler
	assert.Equal(t, 0, b.Retries(), "retries after the client left")
}

// hangingAddr is a loopback address whose connections hang: a listener
// that accepts nothing, its queue of one already taken.
func hangingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	filler, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = filler.Close() })
	return addr
}

// connecting reports whether a connection to addr is waiting for its
// handshake (SYN_SENT in /proc/net/tcp).
func connecting(t *testing.T, addr string) bool {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	var p int
	_, err = fmt.Sscan(port, &p)
	require.NoError(t, err)
	b, err := os.ReadFile("/proc/net/tcp")
	require.NoError(t, err)
	want := fmt.Sprintf("0100007F:%04X", p)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[2] == want && f[3] == "02" {
			return true
		}
	}
	return false
}
