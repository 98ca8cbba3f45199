package harness

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Endpoints is a Kubernetes Service as kube-proxy makes it, for clients
// that dial through [Endpoints.DialContext]: each new connection goes to
// the next endpoint, round robin, with no health checks and no retries.
// An endpoint is in from [Endpoints.Add] (a pod became ready) until the
// time given to [Endpoints.RemoveAt] (its deletion reached kube-proxy,
// some time after the pod was sent SIGTERM, whatever its readiness says
// meanwhile); a connection refused by an endpoint that is still in, or by
// a Service with none, reaches the client as ECONNREFUSED, as kube-proxy's
// DNAT and REJECT rules make it. The zero value has no endpoints.
type Endpoints struct {
	mu      sync.Mutex
	addrs   []string
	leaveAt map[string]time.Time
	next    int
}

// Add puts addr in the Service's endpoints.
func (e *Endpoints) Add(addr string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !slices.Contains(e.addrs, addr) {
		e.addrs = append(e.addrs, addr)
	}
	delete(e.leaveAt, addr)
}

// RemoveAt takes addr out of the endpoints at the instant at: no
// connection dialled from then on goes to it.
func (e *Endpoints) RemoveAt(addr string, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leaveAt == nil {
		e.leaveAt = map[string]time.Time{}
	}
	e.leaveAt[addr] = at
}

// Current returns the endpoints a connection dialled now may go to.
func (e *Endpoints) Current() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.current(time.Now())
}

func (e *Endpoints) current(now time.Time) []string {
	var in []string
	for _, a := range e.addrs {
		if at, ok := e.leaveAt[a]; !ok || now.Before(at) {
			in = append(in, a)
		}
	}
	return in
}

// pick returns the endpoint the next connection goes to.
func (e *Endpoints) pick() (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	in := e.current(time.Now())
	if len(in) == 0 {
		return "", false
	}
	e.next++
	return in[e.next%len(in)], true
}

// DialContext connects to the next endpoint, ignoring addr (the Service's
// own address): a net/http Transport's DialContext.
func (e *Endpoints) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	to, ok := e.pick()
	if !ok {
		return nil, &net.OpError{Op: "dial", Net: network,
			Err: fmt.Errorf("service has no endpoints: %w", syscall.ECONNREFUSED)}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}
