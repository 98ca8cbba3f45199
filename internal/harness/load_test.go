package harness

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Request i starts no earlier than its slot on the schedule, and all of
// Duration × Rate start.
func TestOpenLoopKeepsItsSchedule(t *testing.T) {
	l := OpenLoop{Rate: 100, Duration: 200 * time.Millisecond}
	var mu sync.Mutex
	at := map[int]time.Time{}
	s := l.Run(t.Context(), func(_ context.Context, i int) {
		mu.Lock()
		at[i] = time.Now()
		mu.Unlock()
	})
	require.Equal(t, 20, s.N)
	require.Len(t, at, 20)
	for i, when := range at {
		slot := s.Began.Add(time.Duration(i) * 10 * time.Millisecond)
		assert.False(t, when.Before(slot), "request %d started %s before its slot", i, slot.Sub(when))
	}
}

// Until ends the sending: closed before the start, only the first request
// goes.
func TestOpenLoopStopsAtUntil(t *testing.T) {
	until := make(chan struct{})
	close(until)
	s := OpenLoop{Rate: 100, Duration: time.Second, Until: until}.Run(t.Context(), func(context.Context, int) {})
	assert.Equal(t, 1, s.N)
}

// WaitReady gives up when the process exits or the readiness URL never
// answers, and says which, with the process's last lines.
func TestWaitReadyFails(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   []string
	}{
		{name: "exits", script: "echo starting up; exit 3", want: []string{"exited (exit status 3)", "starting up"}},
		{name: "never answers", script: "echo listening nowhere; exec sleep 600", want: []string{"never answered 2xx", "listening nowhere"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := StartProc("svc", "/bin/sh", nil, "-c", tt.script)
			require.NoError(t, err)
			defer p.Kill()
			_, err = p.Await(t.Context(), " ") // its line is printed before WaitReady reads them
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			err = WaitReady(ctx, p, "http://"+deadAddr(t)+"/healthz/ready")
			require.Error(t, err)
			for _, w := range tt.want {
				assert.True(t, strings.Contains(err.Error(), w), "got %q; want it to contain %q", err, w)
			}
		})
	}
}
