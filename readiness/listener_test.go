package readiness_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/drainkit/drainkit/readiness"
)

// runCheck runs one check the way an evaluation does.
func runCheck(t *testing.T, c readiness.Check) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), c.Timeout)
	defer cancel()
	return c.Probe(ctx)
}

func TestListenerDefaults(t *testing.T) {
	c := readiness.Listener(":8080")
	if c.Name != "listener :8080" || c.Timeout != 100*time.Millisecond || c.Tier != readiness.Gating {
		t.Errorf("got %s %v %v; want listener :8080 100ms gating", c.Name, c.Timeout, c.Tier)
	}
}

func TestListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	if err := runCheck(t, readiness.Listener(addr)); err != nil {
		t.Errorf("open listener: %v; want nil", err)
	}
	<-accepted
	ln.Close()
	if err := runCheck(t, readiness.Listener(addr)); err == nil {
		t.Errorf("closed listener: nil; want an error")
	}
}
