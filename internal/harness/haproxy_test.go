package harness

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stallingServer is a real HTTP server whose readiness answers 200,
// except that the next n probes get no answer until the prober gives up,
// like a server too starved to answer within the balancer's check
// timeout.
type stallingServer struct {
	mu      sync.Mutex
	stall   int           // probes still to stall
	stalled chan struct{} // receives when a stalled probe was given up
	passed  chan struct{} // receives when a probe was answered 200
}

func (g *stallingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

func (g *stallingServer) setStall(n int) {
	g.mu.Lock()
	g.stall = n
	g.mu.Unlock()
}

// chkdown is how many times HAProxy's health checks took server i from UP
// to DOWN.
func chkdown(t *testing.T, h *HAProxy, i int) int {
	t.Helper()
	r, err := h.ServerStat(t.Context(), i)
	require.NoError(t, err)
	n, err := strconv.Atoi(r["chkdown"])
	require.NoError(t, err, "chkdown %q", r["chkdown"])
	return n
}

// TestHAProxyFall: one probe answered too late leaves a server in the
// balancer, as a readiness failureThreshold of 2 does; ProbeFall in a row
// take it out.
func TestHAProxyFall(t *testing.T) {
	path, err := HAProxyPath()
	require.NoError(t, err, "haproxy not found (scripts/test installs it)")
	g := &stallingServer{stalled: make(chan struct{}), passed: make(chan struct{})}
	addr := serveHTTP(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h, err := StartHAProxy(ctx, path, HAProxyConfig{Front: deadAddr(t), Servers: []Server{{Name: "s0", Addr: addr}}, Dir: t.TempDir()})
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, h.WaitServer(ctx, 0, true))
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
	if err := h.WaitServer(ctx, 0, false); err != nil {
		t.Errorf("%d probes in a row answered late: %v", ProbeFall, err)
	}
}
