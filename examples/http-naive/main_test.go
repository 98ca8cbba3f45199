package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// It serves until its context ends, then shuts down cleanly: the listener
// is closed at once (the drill shows what that costs behind a Service).
func TestServesThenShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	listening := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, "127.0.0.1:0", slog.New(slog.DiscardHandler), listening) }()
	addr := <-listening
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/hello", "/healthz/ready", "/healthz/live"} {
		resp, err := client.Get("http://" + addr + path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	cancel()
	require.NoError(t, <-errc)
	_, err := client.Get("http://" + addr + "/hello")
	assert.Error(t, err, "the listener is closed after the shutdown")
}
