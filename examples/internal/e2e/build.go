package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"sync"
)

// Module paths of the programs the harness runs.
const (
	RoomServicePkg = "github.com/drainkit/drainkit/examples/room-service"
	GatewayPkg     = "github.com/drainkit/drainkit/examples/gateway"
)

// Binaries are the built programs the harness runs.
type Binaries struct {
	RoomService string
	Gateway     string
}

// Build compiles room-service and gateway into dir, with the race
// detector when race is set (the tests: a race under real load fails the
// run; the demo builds without it, for speed).
func Build(ctx context.Context, dir string, race bool) (Binaries, error) {
	b := Binaries{RoomService: filepath.Join(dir, "room-service"), Gateway: filepath.Join(dir, "gateway")}
	for _, x := range []struct{ pkg, out string }{{RoomServicePkg, b.RoomService}, {GatewayPkg, b.Gateway}} {
		args := []string{"build", "-o", x.out}
		if race {
			args = append(args, "-race")
		}
		out, err := exec.CommandContext(ctx, "go", append(args, x.pkg)...).CombinedOutput()
		if err != nil {
			return Binaries{}, fmt.Errorf("e2e: go build %s: %w\n%s", x.pkg, err, out)
		}
	}
	return b, nil
}

// FreePort returns a loopback TCP address that was free a moment ago.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("e2e: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ports hands out free ports, never one it handed out before: a port a
// cluster reserved for a slot that is free for now must not become
// another of its listeners (a room-service's admin port answering the
// balancer's probes for a gateway slot), and the kernel may return a
// recently closed port again.
type ports struct {
	mu   sync.Mutex
	used map[string]bool
}

// pick returns n free ports none of which was handed out before or is in
// taken.
func (p *ports) pick(n int, taken ...string) ([]string, error) {
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
			return nil, fmt.Errorf("e2e: no %d unused free ports after %d tries", n, tries)
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
			return nil, fmt.Errorf("e2e: free port: %w", err)
		}
		ls = append(ls, l)
		addrs[i] = l.Addr().String()
	}
	return addrs, nil
}
