package grpchealth_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// state is a settable lifecycle state, standing in for lifecycle.Manager.
type state struct{ v atomic.Int32 }

func newState(s lifecycle.State) *state {
	st := &state{}
	st.set(s)
	return st
}

func (s *state) State() lifecycle.State { return lifecycle.State(s.v.Load()) }
func (s *state) set(v lifecycle.State)  { s.v.Store(int32(v)) }

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newRegistry returns a registry for tests, closed at the end of the test.
func newRegistry(t *testing.T, st *state) *readiness.Registry {
	t.Helper()
	r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: quietLogger()}, st.State)
	require.NoError(t, err, "New")
	t.Cleanup(func() { assert.NoError(t, r.Close(context.Background()), "Close") })
	return r
}

// runCheck runs one check the way an evaluation does.
func runCheck(t *testing.T, c readiness.Check) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), c.Timeout)
	defer cancel()
	return c.Probe(ctx)
}
