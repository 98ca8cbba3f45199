package readiness_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	assert.Equal(t, "listener :8080", c.Name)
	assert.Equal(t, 100*time.Millisecond, c.Timeout)
	assert.Equal(t, readiness.Gating, c.Tier)
}

func TestListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	assert.NoError(t, runCheck(t, readiness.Listener(addr)), "open listener")
	<-accepted
	ln.Close()
	assert.Error(t, runCheck(t, readiness.Listener(addr)), "closed listener")
}
