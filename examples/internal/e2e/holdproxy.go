package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// HoldProxy is a TCP proxy on loopback that forwards every connection to
// one target, byte for byte, until [HoldProxy.Hold] makes it hold them: a
// network partition between one process and its Redis, as the process
// sees it. Held connections stay open and new ones are accepted, but no
// byte (nor a close) crosses until [HoldProxy.Forward]; connections hang,
// they are never reset or refused.
type HoldProxy struct {
	target string
	ln     net.Listener
	// ctx ends at Close: it bounds every dial and every wait while held.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the proxy started

	mu     sync.Mutex
	held   bool
	gate   chan struct{} // closed while forwarding; a fresh, open one while held
	conns  map[net.Conn]struct{}
	closed bool
}

// StartHoldProxy listens on a free loopback port and forwards every
// connection it accepts to target (host:port). Close stops it.
func StartHoldProxy(target string) (*HoldProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("e2e: hold proxy: %w", err)
	}
	return serveHoldProxy(ln, target), nil
}

func serveHoldProxy(ln net.Listener, target string) *HoldProxy {
	ctx, cancel := context.WithCancel(context.Background())
	p := &HoldProxy{target: target, ln: ln, ctx: ctx, cancel: cancel,
		gate: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.gate)
	p.wg.Add(1)
	go p.accept()
	return p
}

// Addr is the address the proxy listens on (host:port).
func (p *HoldProxy) Addr() string { return p.ln.Addr().String() }

// Hold stops forwarding in both directions. Bytes sent from then on are
// kept, not dropped, and a connection accepted while held is not dialled
// to the target until Forward. A write already under way completes: it
// was sent before the cut.
func (p *HoldProxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held {
		p.held, p.gate = true, make(chan struct{})
	}
}

// Forward resumes forwarding: what was held is delivered, in order, and
// connections accepted while held are dialled to the target.
func (p *HoldProxy) Forward() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held {
		p.held = false
		close(p.gate)
	}
}

// Close stops listening, closes every connection on both sides and waits
// for every goroutine the proxy started. It is safe to call more than once.
func (p *HoldProxy) Close() {
	p.mu.Lock()
	p.closed = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	p.cancel()
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}

// await blocks while the proxy holds; false once it is closing.
func (p *HoldProxy) await() bool {
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	select {
	case <-gate:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// track registers c so that Close closes it; false (and c closed) when
// Close came first, which would otherwise miss it.
func (p *HoldProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *HoldProxy) release(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *HoldProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed by Close
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1) // this goroutine is counted, so Close's Wait cannot have begun at zero
		go p.serve(c)
	}
}

// serve dials the target for client once forwarding, then copies both
// ways until both directions have ended.
func (p *HoldProxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.release(client)
	if !p.await() {
		return
	}
	var d net.Dialer
	server, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil || !p.track(server) {
		return // the client sees its connection closed, as with a proxy whose upstream is down
	}
	defer p.release(server)
	upDone := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(upDone)
		p.pump(server, client)
	}()
	p.pump(client, server)
	<-upDone // a half-closed connection still carries the other direction
}

// pump copies src to dst, waiting at the gate between a read and its
// write, so what is read while held is kept until Forward. A clean end
// (EOF) is passed on as a half-close after the same wait; any other error
// closes both sides, which ends the other direction too.
func (p *HoldProxy) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !p.await() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
				return
			}
		}
		_ = src.Close()
		_ = dst.Close()
		return
	}
}
