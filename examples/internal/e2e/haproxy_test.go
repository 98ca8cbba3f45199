package e2e

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// stallingGateway is a real HTTP server whose /healthz/ready answers 200,
// except that the next n probes get no answer until the prober gives up,
// like a gateway too starved to answer within the balancer's check
// timeout.
type stallingGateway struct {
	mu      sync.Mutex
	stall   int           // probes still to stall
	stalled chan struct{} // receives when a stalled probe was given up
	passed  chan struct{} // receives when a probe was answered 200
}

func (g *stallingGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

func (g *stallingGateway) setStall(n int) {
	g.mu.Lock()
	g.stall = n
	g.mu.Unlock()
}

// chkdown is how many times HAProxy's health checks took slot's server
// from UP to DOWN.
func chkdown(t *testing.T, h *haproxy, slot int) int {
	t.Helper()
	rows, err := h.stat(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r["pxname"] == "gateways" && r["svname"] == GatewaySlot(slot) {
			n, err := strconv.Atoi(r["chkdown"])
			if err != nil {
				t.Fatalf("chkdown %q: %v", r["chkdown"], err)
			}
			return n
		}
	}
	t.Fatalf("no server gw%d in show stat", slot)
	return 0
}

// TestHAProxyFall: one probe answered too late leaves a gateway in the
// balancer, as the deploy manifests' failureThreshold 2 does; ProbeFall
// in a row take it out.
func TestHAProxyFall(t *testing.T) {
	path, err := haproxyPath()
	if err != nil {
		t.Fatalf("haproxy not found (scripts/test installs it): %v", err)
	}
	g := &stallingGateway{stalled: make(chan struct{}), passed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close(); <-served }()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	frontAddr := front.Addr().String()
	front.Close() // HAProxy binds it
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h, err := startHAProxy(ctx, path, t.TempDir(), frontAddr, []string{ln.Addr().String()}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	if err := h.waitServer(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	base := chkdown(t, h, 0)

	// A response names the slot that answered it.
	resp, err := http.Get("http://" + frontAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(ServedBy); got != GatewaySlot(0) {
		t.Errorf("%s: got %q; want %q", ServedBy, got, GatewaySlot(0))
	}

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
	if err := h.waitServer(ctx, 0, false); err != nil {
		t.Errorf("%d probes in a row answered late: %v", ProbeFall, err)
	}
}
