// Package listener is what fxmodule.HTTP and fxgrpc.Server share: a
// listener opened at start, and the gating readiness check that dials the
// address it is bound to (":0" binds a port that only the listener knows).
package listener

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/drainkit/drainkit/readiness"
)

// CheckAddr refuses an address net.Listen("tcp", addr) could never take,
// whatever the machine: no port, or a port that is no number in 0–65535
// nor a service name ("" is taken: any port). The caller says it before
// anything starts, as a configuration mistake (exit 78), not at start as
// a failure of the world.
func CheckAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return fmt.Errorf("%w; want host:port, e.g. \":8080\" or \"127.0.0.1:0\"", err)
	}
	return nil
}

// Bound is a server's listener address, set once it listens.
type Bound struct {
	addr atomic.Pointer[string]
}

// Listen listens on addr and records the bound address.
func (b *Bound) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	a := ln.Addr().String()
	b.addr.Store(&a)
	return ln, nil
}

// Check returns the gating readiness check name, which dials the bound
// address and fails until the server listens.
func (b *Bound) Check(name, addr string) readiness.Check {
	check := readiness.Listener(addr)
	check.Name = name
	check.Probe = func(ctx context.Context) error {
		a := b.addr.Load()
		if a == nil {
			return errors.New("not listening yet")
		}
		return readiness.Listener(*a).Probe(ctx)
	}
	return check
}
