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

// Ports hands out free loopback ports, never one it handed out before: a
// port reserved for an instance that has not started yet must not become
// another's listener (an admin port answering the balancer's probes for
// another server), and the kernel may return a recently closed port
// again. The zero value is ready to use.
type Ports struct {
	mu   sync.Mutex
	used map[string]bool
}

// Pick returns n free loopback addresses, none of which was handed out
// before or is in taken.
func (p *Ports) Pick(n int, taken ...string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used == nil {
		p.used = map[string]bool{}
	}
	for _, a := range taken {
		p.used[a] = true
	}
	var out []string
	for tries := 0; len(out) < n; tries++ {
		if tries == 100 {
			return nil, fmt.Errorf("harness: no %d unused free ports after %d tries", n, tries)
		}
		addrs, err := freePorts(n - len(out))
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if !p.used[a] {
				p.used[a] = true
				out = append(out, a)
			}
		}
	}
	return out, nil
}

func freePorts(n int) ([]string, error) {
	// Hold every listener until all are picked, so no two are the same.
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("harness: free port: %w", err)
		}
		ls = append(ls, l)
		addrs[i] = l.Addr().String()
	}
	return addrs, nil
}
