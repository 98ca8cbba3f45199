package readiness_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// TestHTTPEndpoints probes a real HTTP server on loopback.
func TestHTTPEndpoints(t *testing.T) {
	st := newState(lifecycle.Running)
	r := newRegistry(t, st, nil)
	mustAdd(t, r,
		readiness.Check{Name: "db", Probe: (&counter{}).probe},
		readiness.Check{Name: "im", Tier: readiness.Informational, Probe: (&counter{err: errors.New("im down")}).probe})
	mux := http.NewServeMux()
	r.Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s: Content-Type", path)
		var body map[string]any
		require.NoError(t, json.Unmarshal(b, &body), "%s: body %q", path, b)
		return resp.StatusCode, body
	}

	code, body := get("/healthz/ready")
	assert.Equal(t, 200, code, "ready")
	assert.Equal(t, "degraded", body["status"], "ready")
	for _, f := range []string{"service", "node_id", "time_unix_ms"} {
		assert.Contains(t, body, f, "ready body")
	}
	checks, _ := body["checks"].([]any)
	require.Len(t, checks, 1, "ready checks: want only the failing one")
	c, ok := checks[0].(map[string]any)
	require.True(t, ok, "ready check %v is not an object", checks[0])
	for _, f := range []string{"name", "tier", "status", "message", "duration_ms", "age_ms"} {
		assert.Contains(t, c, f, "check")
	}
	assert.Equal(t, []any{"im", "informational", "fail", "im down"},
		[]any{c["name"], c["tier"], c["status"], c["message"]}, "check name, tier, status, message")

	_, body = get("/healthz/ready?verbose=1")
	assert.Len(t, body["checks"], 2, "verbose checks: want both")
	code, body = get("/healthz/live")
	assert.Equal(t, 200, code, "live")
	assert.Equal(t, "ok", body["status"], "live")

	st.set(lifecycle.Draining)
	code, body = get("/healthz/ready")
	assert.Equal(t, 503, code, "ready while draining")
	assert.Equal(t, "fail", body["status"], "ready while draining")
	assert.Equal(t, "draining", body["reason"], "ready while draining")
	code, _ = get("/healthz/live")
	assert.Equal(t, 200, code, "live while draining")

	resp, err := srv.Client().Post(srv.URL+"/healthz/ready", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "POST ready: probes are read-only")
}

func TestHTTPStatusCodes(t *testing.T) {
	tests := []struct {
		name     string
		state    lifecycle.State
		gating   error
		stale    bool
		wantLive int
		wantRdy  int
	}{
		{"ready", lifecycle.Running, nil, false, 200, 200},
		{"gating check fails", lifecycle.Running, errors.New("down"), false, 200, 503},
		{"starting", lifecycle.Starting, nil, false, 200, 503},
		{"stuck main loop", lifecycle.Running, nil, true, 500, 200},
		{"stuck main loop while draining", lifecycle.Draining, nil, true, 200, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRegistry(t, newState(tt.state), nil)
				mustAdd(t, r, readiness.Check{Name: "db", Probe: (&counter{err: tt.gating}).probe})
				_, err := r.Heartbeat("loop", readiness.DefaultCacheTTL)
				require.NoError(t, err)
				if tt.stale {
					time.Sleep(2 * readiness.DefaultCacheTTL) // fake clock
				}
				for _, p := range []struct {
					name string
					h    http.Handler
					want int
				}{{"live", r.LiveHandler(), tt.wantLive}, {"ready", r.ReadyHandler(), tt.wantRdy}} {
					rec := httptest.NewRecorder()
					p.h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), "GET", "/", nil))
					assert.Equal(t, p.want, rec.Code, "%s (body %s)", p.name, rec.Body)
				}
			})
		})
	}
}

// A nil mux, or one the registry is already mounted on, is a mistake in how
// the program is put together: Mount panics at once, as mux.Handle does,
// with a message that says which.
func TestMountPanicsOnANilOrAlreadyMountedMux(t *testing.T) {
	r := newRegistry(t, newState(lifecycle.Running), nil)
	assert.PanicsWithValue(t, "readiness: Mount: mux is nil", func() { r.Mount(nil) }, "Mount(nil)")
	mux := http.NewServeMux()
	r.Mount(mux)
	assert.PanicsWithValue(t, "readiness: Mount: mux already serves GET /healthz/live; mount a registry once per mux",
		func() { r.Mount(mux) }, "second Mount on one mux")
	assert.NotPanics(t, func() { r.Mount(http.NewServeMux()) }, "Mount on another mux")
}
