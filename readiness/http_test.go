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
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q; want application/json", path, ct)
		}
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("%s: body %q: %v", path, b, err)
		}
		return resp.StatusCode, body
	}

	code, body := get("/healthz/ready")
	if code != 200 || body["status"] != "degraded" {
		t.Errorf("ready: got %d %v; want 200 degraded", code, body["status"])
	}
	for _, f := range []string{"service", "node_id", "time_unix_ms"} {
		if _, ok := body[f]; !ok {
			t.Errorf("ready body lacks %q: %v", f, body)
		}
	}
	checks, _ := body["checks"].([]any)
	if len(checks) != 1 {
		t.Fatalf("ready checks = %v; want only the failing one", body["checks"])
	}
	c := checks[0].(map[string]any)
	for _, f := range []string{"name", "tier", "status", "message", "duration_ms", "age_ms"} {
		if _, ok := c[f]; !ok {
			t.Errorf("check lacks %q: %v", f, c)
		}
	}
	if c["name"] != "im" || c["tier"] != "informational" || c["status"] != "fail" || c["message"] != "im down" {
		t.Errorf("check = %v; want im, informational, fail, \"im down\"", c)
	}

	if _, body := get("/healthz/ready?verbose=1"); len(body["checks"].([]any)) != 2 {
		t.Errorf("verbose checks = %v; want both", body["checks"])
	}
	if code, body := get("/healthz/live"); code != 200 || body["status"] != "ok" {
		t.Errorf("live: got %d %v; want 200 ok", code, body["status"])
	}

	st.set(lifecycle.Draining)
	if code, body := get("/healthz/ready"); code != 503 || body["status"] != "fail" || body["reason"] != "draining" {
		t.Errorf("ready while draining: got %d %v %v; want 503 fail draining", code, body["status"], body["reason"])
	}
	if code, _ := get("/healthz/live"); code != 200 {
		t.Errorf("live while draining: got %d; want 200", code)
	}

	resp, err := srv.Client().Post(srv.URL+"/healthz/ready", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST ready: got %d; want 405 (probes are read-only)", resp.StatusCode)
	}
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
				if _, err := r.Heartbeat("loop", readiness.DefaultCacheTTL); err != nil {
					t.Fatal(err)
				}
				if tt.stale {
					time.Sleep(2 * readiness.DefaultCacheTTL) // fake clock
				}
				for _, p := range []struct {
					h    http.Handler
					want int
				}{{r.LiveHandler(), tt.wantLive}, {r.ReadyHandler(), tt.wantRdy}} {
					rec := httptest.NewRecorder()
					p.h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), "GET", "/", nil))
					if rec.Code != p.want {
						t.Errorf("got %d; want %d (body %s)", rec.Code, p.want, rec.Body)
					}
				}
			})
		})
	}
}
