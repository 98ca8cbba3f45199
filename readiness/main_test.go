package readiness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// state is a settable lifecycle state, standing in for lifecycle.Manager,
// whose State method readiness.New is given.
type state struct{ v atomic.Int32 }

func newState(s lifecycle.State) *state {
	st := &state{}
	st.set(s)
	return st
}

func (s *state) State() lifecycle.State { return lifecycle.State(s.v.Load()) }
func (s *state) set(v lifecycle.State)  { s.v.Store(int32(v)) }

// logs collects JSON log records written by a registry.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "log line %q", line)
		recs = append(recs, rec)
	}
	return recs
}

func (l *logs) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newRegistry returns a registry for tests, closed at the end of the test.
// Inside a synctest bubble it must be called from the bubble.
func newRegistry(t *testing.T, st *state, l *logs) *readiness.Registry {
	t.Helper()
	if l == nil {
		l = &logs{}
	}
	r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: l.logger()}, st.State)
	require.NoError(t, err, "New")
	t.Cleanup(func() { assert.NoError(t, r.Close(context.Background()), "Close") })
	return r
}

// counter is a check probe that counts its runs and returns err.
type counter struct {
	runs atomic.Int32
	err  error
}

func (c *counter) probe(context.Context) error {
	c.runs.Add(1)
	return c.err
}

func mustAdd(t *testing.T, r *readiness.Registry, cs ...readiness.Check) {
	t.Helper()
	for _, c := range cs {
		require.NoError(t, r.Add(c), "Add(%q)", c.Name)
	}
}

func findCheck(rep readiness.Report, name string) (readiness.CheckResult, bool) {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return readiness.CheckResult{}, false
}

// hasPrefix asserts that s starts with prefix, which testify has no
// assertion for.
func hasPrefix(t *testing.T, s, prefix string, msgAndArgs ...any) bool {
	t.Helper()
	if strings.HasPrefix(s, prefix) {
		return true
	}
	return assert.Fail(t, fmt.Sprintf("%q does not start with %q", s, prefix), msgAndArgs...)
}
