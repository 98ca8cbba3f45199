package app

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/proctest"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// This test builds the gateway and drives it as an orchestrator would: a
// real process, a real SIGTERM, real HTTP and gRPC.

// startProc runs the gateway on a free port and returns it with its address.
func startProc(t *testing.T, env ...string) (*proctest.Proc, string) {
	t.Helper()
	p := proctest.Start(t, "gateway", proctest.Build(t, "github.com/drainkit/drainkit/examples/gateway"),
		append([]string{"HTTP_ADDR=127.0.0.1:0", "NODE_ID=gw-proc"}, env...)...)
	line := p.Await(t, "listening on ")
	return p, strings.TrimSpace(line[strings.Index(line, "listening on ")+len("listening on "):])
}

func TestSIGTERMMidRequestCompletesAndExitsClean(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b := startBackend(t, &testRooms{apply: func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		once.Do(func() { close(started) })
		select {
		case <-release:
			return &roompb.ApplyResponse{Status: roompb.ApplyResponse_APPLIED, Seq: 42}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	p, addr := startProc(t, "ROOM_GRPC_ADDRS="+b.addr, "DRAIN_DELAY=200ms", "DRAIN_TIMEOUT=20s")
	c := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	eventually(t, c, "http://"+addr+"/healthz/ready", http.StatusOK)

	type answer struct {
		code int
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := c.Post("http://"+addr+"/api/v1/rooms/r1/commands", "application/json",
			strings.NewReader(`{"command_id":"c1","op":"join"}`))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, string(body), err}
	}()
	<-started
	p.Signal(t, syscall.SIGTERM)
	p.Await(t, `"new_status":"draining"`)
	p.Await(t, `"phase":"wait_in_flight","hooks"`) // the drain now waits for our request
	close(release)

	a := <-got
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusOK, a.code, a.body)
	assert.JSONEq(t, `{"status":"applied","seq":42}`, a.body)
	assert.Equal(t, 0, p.ExitCode(t), p.Output())
	assert.Contains(t, p.Output(), `"exit_code":0`)
}
