package serve_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/internal/serve"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The hook shuts the server down and returns once Serve has: nothing of
// it is left running. A server that never served has nothing to wait for.
func TestHookEndsTheServeGoroutine(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	s := serve.NewHTTP("api", srv, slog.New(slog.DiscardHandler))
	never := serve.NewHTTP("never", &http.Server{}, slog.New(slog.DiscardHandler))
	require.NoError(t, never.Hook().Run(context.Background()), "never served")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.Serve(ln)
	resp, err := http.Get("http://" + ln.Addr().String())
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	h := s.Hook()
	assert.Equal(t, "api.serve", h.Name)
	require.NoError(t, h.Run(context.Background()))
	_, err = net.Dial("tcp", ln.Addr().String())
	assert.Error(t, err, "the listener is closed")
}

// At the deadline the hook cuts a request still running, and still waits
// for Serve to return.
func TestHookCutsWhatIsActiveAtTheDeadline(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release
	})}
	s := serve.NewHTTP("api", srv, slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.Serve(ln)
	clientErr := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		clientErr <- err
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, s.Hook().Run(ctx), context.Canceled)
	assert.Error(t, <-clientErr, "cut off")
}
