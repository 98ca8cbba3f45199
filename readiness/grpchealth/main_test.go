package grpchealth_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

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
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// runCheck runs one check the way an evaluation does.
func runCheck(t *testing.T, c readiness.Check) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), c.Timeout)
	defer cancel()
	return c.Probe(ctx)
}
