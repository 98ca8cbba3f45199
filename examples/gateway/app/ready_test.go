package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/lifecycle"
)

// startApp runs the whole gateway app in process against addrs, as main
// does (fxmodule.Run), and returns its HTTP address. The app is drained at
// the end of the test and must exit cleanly.
func startApp(t *testing.T, addrs ...string) string {
	t.Helper()
	lcfg := lifecycle.Config{Service: DefaultService, NodeID: "gw-test", DrainTimeout: 5 * time.Second}
	cfg := Config{HTTPAddr: "127.0.0.1:0", Backends: addrs, RequestTimeout: 5 * time.Second,
		MaxPending: DefaultMaxPending, MaxPendingBytes: DefaultMaxPendingBytes}
	listening := make(chan string, 1)
	app := fxmoduletest.Start(t, options(lcfg, cfg, quiet(), func(a string) { listening <- a })...)
	t.Cleanup(func() {
		if r := app.Stop(); r.ExitCode != lifecycle.ExitClean {
			t.Errorf("gateway exit code %d; want %d", r.ExitCode, lifecycle.ExitClean)
		}
	})
	return <-listening
}

type probe struct {
	code int
	body struct {
		Status string `json:"status"`
		Checks []struct {
			Name    string `json:"name"`
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"checks"`
	}
}

func get(t *testing.T, c *http.Client, url string) probe {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	p := probe{code: resp.StatusCode}
	require.NoError(t, json.Unmarshal(b, &p.body), "body %s", b)
	return p
}

// eventually probes until want answers, bounded: health changes reach the
// gateway through a gRPC Watch stream and a one-second result cache.
func eventually(t *testing.T, c *http.Client, url string, want int) probe {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := get(t, c, url)
		if p.code == want || time.Now().After(deadline) {
			require.Equal(t, want, p.code, "got %d; want %d (%+v)", p.code, want, p.body)
			return p
		}
		time.Sleep(50 * time.Millisecond) // polling a remote state change, bounded above
	}
}

// TestReadinessDoesNotFollowBackendHealth: a room-service that is not
// ready (as all are while Redis is down) leaves the gateway ready, so the
// balancer keeps every gateway and they hold requests until room-service
// is back; liveness never depends on room-service.
func TestReadinessDoesNotFollowBackendHealth(t *testing.T) {
	b := startBackend(t, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 1)})
	b.setServing(false)
	addr := startApp(t, b.addr)
	c := &http.Client{Timeout: 5 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	eventually(t, c, "http://"+addr+"/healthz/ready", http.StatusOK)
	assert.Equal(t, http.StatusOK, get(t, c, "http://"+addr+"/healthz/live").code)
}

// Not ready once grpc-go has tried every address and failed
// (TRANSIENT_FAILURE), not only while it is still connecting, which any
// gateway's first probe sees.
func TestNotReadyWhenNoBackendAddressIsConnectable(t *testing.T) {
	addr := startApp(t, deadAddr(t), deadAddr(t))
	c := &http.Client{Timeout: 5 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := get(t, c, "http://"+addr+"/healthz/ready")
		require.Equal(t, http.StatusServiceUnavailable, p.code, "got %d; want 503 (%+v)", p.code, p.body)
		require.NotEmpty(t, p.body.Checks)
		require.Equal(t, "room_grpc", p.body.Checks[0].Name, "the failing check is named")
		if strings.Contains(p.body.Checks[0].Message, "TRANSIENT_FAILURE") {
			break
		}
		require.False(t, time.Now().After(deadline), "no connection attempt failed in 10s: %+v", p.body)
		time.Sleep(50 * time.Millisecond) // polling a remote state change, bounded above
	}
	assert.Equal(t, http.StatusOK, get(t, c, "http://"+addr+"/healthz/live").code)
}

func TestReadyWhenOneBackendAddressIsConnectable(t *testing.T) {
	b := startBackend(t, &testRooms{})
	addr := startApp(t, deadAddr(t), b.addr)
	c := &http.Client{Timeout: 5 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	eventually(t, c, "http://"+addr+"/healthz/ready", http.StatusOK)
}

// The whole app counts the attempts it sends again on a client's behalf in
// gateway_backend_retries_total on its /metrics, where the e2e suite reads
// them. Only Handler registered the counter, so the app, and every e2e
// run, showed no retries whatever the gateways resent.
func TestAppCountsItsRetriesOnItsMetrics(t *testing.T) {
	var calls atomic.Int64
	b := startBackend(t, &testRooms{apply: func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		if calls.Add(1) == 1 {
			return fails(codes.Unknown)(ctx, req)
		}
		return applyAnswer(roompb.ApplyResponse_APPLIED, 1)(ctx, req)
	}})
	addr := startApp(t, b.addr)
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	eventually(t, c, "http://"+addr+"/healthz/ready", http.StatusOK)
	resp, err := c.Post("http://"+addr+"/api/v1/rooms/r1/commands", "application/json", strings.NewReader(`{"command_id":"c1","op":"join"}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the command, answered on its second attempt: %s", body)
	assert.Equal(t, 1.0, scrape(t, addr)[`gateway_backend_retries_total{after="unknown"}`], "retries after an unknown outcome on /metrics")
}
