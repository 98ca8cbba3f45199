package harness

import (
	"fmt"
	"net"
	"sync"
)

// FreePort returns a loopback TCP address that was free a moment ago.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("harness: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Ports hands out free loopback ports for servers that start later, never
// one it handed out before: a port reserved for an instance that has not
// started yet must not become another's listener (an admin port answering
// the balancer's probes for another server). On Linux a port stays
// reserved until Close (see reserve), so a rolling update's spare slot,
// picked at the start and bound only by a later instance, is not taken
// meanwhile by another bind or by a busy machine's outgoing connections,
// which take their ports from the same range. A server that binds without
// SO_REUSEADDR needs its ports freed (Free) just before it starts.
// Elsewhere a port is only free when picked. The zero value is ready to use.
type Ports struct {
	mu   sync.Mutex
	used map[string]bool
	held map[string]func() // each reservation's end
}

// Pick returns n free loopback addresses, none of which was handed out
// before or is in taken.
func (p *Ports) Pick(n int, taken ...string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used == nil {
		p.used, p.held = map[string]bool{}, map[string]func(){}
	}
	for _, a := range taken {
		p.used[a] = true
	}
	var out []string
	for tries := 0; len(out) < n; tries++ {
		if tries == 100+n {
			return nil, fmt.Errorf("harness: no %d unused free ports after %d tries", n, tries)
		}
		addr, release, err := reserve()
		if err != nil {
			return nil, fmt.Errorf("harness: free port: %w", err)
		}
		if p.used[addr] {
			release()
			continue
		}
		p.used[addr] = true
		p.held[addr] = release
		out = append(out, addr)
	}
	return out, nil
}

// Free ends the reservations of addrs, for a server that binds without
// SO_REUSEADDR (a user's own, in the drill); none is handed out again.
func (p *Ports) Free(addrs ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		if release, ok := p.held[a]; ok {
			release()
			delete(p.held, a)
		}
	}
}

// Close ends every reservation; the servers listening keep their ports.
func (p *Ports) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, release := range p.held {
		release()
		delete(p.held, a)
	}
}
