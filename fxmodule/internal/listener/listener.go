// Package listener is what fxmodule.HTTP and fxgrpc.Server share: a
// listener opened at start, and the gating readiness check that dials the
// address it is bound to (":0" binds a port that only the listener knows).
package listener

import (
	"context"
	"errors"
	"net"
	"sync/atomic"

	"github.com/drainkit/drainkit/readiness"
)

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
