package e2e

import (
	"fmt"
	"sync"
	"syscall"
	"time"
)

// Pause stops n with SIGSTOP, as a paused VM, a container throttled at its
// CPU limit or a long GC pause stops it: the process keeps its sockets and
// answers nothing, and its leases expire in Redis. The returned function
// (safe to call more than once) continues it with SIGCONT and returns the
// window it was stopped.
//
// For the ownership checks, a hold that n reported lost after the stop
// began ends when the stop began: a stopped process acts on nothing, and
// what it writes after waking is fenced. Whether a valid lease was taken
// over is the scenario's to check (no key expires before the stop plus
// TTL·2/3, see the crash scenario).
func (c *Cluster) Pause(n *Node) (resume func() Window, err error) {
	w := Window{From: time.Now()}
	c.mu.Lock()
	if c.stops == nil {
		c.stops = map[string][]Window{}
	}
	i := len(c.stops[n.Name])
	c.stops[n.Name] = append(c.stops[n.Name], w)
	c.mu.Unlock()
	if err := n.Signal(syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("e2e: pause %s: %w", n.Name, err)
	}
	var once sync.Once
	return func() Window {
		once.Do(func() {
			_ = n.Signal(syscall.SIGCONT) // fails only once the process is gone
			c.mu.Lock()
			c.stops[n.Name][i].To = time.Now()
			c.mu.Unlock()
		})
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.stops[n.Name][i]
	}, nil
}

// StoppedDuring reports whether node was stopped by [Cluster.Pause] at
// some moment from from to to.
func (c *Cluster) StoppedDuring(node string, from, to time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.stops[node] {
		if !w.From.After(to) && (w.To.IsZero() || !w.To.Before(from)) {
			return true
		}
	}
	return false
}

// stopsCopy returns the windows of every node Pause stopped.
func (c *Cluster) stopsCopy() map[string][]Window {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]Window, len(c.stops))
	for n, ws := range c.stops {
		out[n] = append([]Window(nil), ws...)
	}
	return out
}
