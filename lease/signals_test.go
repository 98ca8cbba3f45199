package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// unstartedManager is a Manager that never talks to Redis: enough for a
// lease's own state, which end changes without a call.
func unstartedManager(t *testing.T) *Manager {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	m, err := New(c, testConfig())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// A lease's context says how it ended whether it was asked for before
// the end or only after it (when the end made nothing).
func TestSignalsAfterTheEnd(t *testing.T) {
	errTaken := fmt.Errorf("%w: taken by another holder", ErrLost)
	tests := []struct {
		name      string
		askBefore bool
		cause     error
		lost      bool
	}{
		{"released, asked before", true, ErrReleased, false},
		{"released, asked after", false, ErrReleased, false},
		{"lost, asked before", true, errTaken, true},
		{"lost, asked after", false, errTaken, true},
		{"left to expire, asked after", false, ErrLeftToExpire, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := unstartedManager(t).newLease("r1", 1, "n|h|1", time.Now())
			if tt.askBefore {
				if err := l.Context().Err(); err != nil {
					t.Fatalf("Context().Err() before the end = %v; want nil", err)
				}
			}
			if !l.end(tt.cause, tt.lost) {
				t.Fatal("end: got false; want true (the first end)")
			}
			if l.end(ErrReleased, false) {
				t.Fatal("second end: got true; want false")
			}
			if got := context.Cause(l.Context()); !errors.Is(got, tt.cause) {
				t.Errorf("context.Cause = %v; want %v", got, tt.cause)
			}
			if l.Context() != l.Context() {
				t.Error("Context() gave two contexts; want one")
			}
		})
	}
}

// Callers asking for the context while the lease ends all get one
// context, and it ends with the lease.
func TestSignalsRaceTheEnd(t *testing.T) {
	for range 50 {
		l := unstartedManager(t).newLease("r1", 1, "n|h|1", time.Now())
		const callers = 4
		ctxs := make([]context.Context, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { ctxs[i] = l.Context() })
		}
		wg.Go(func() { l.end(ErrReleased, false) })
		wg.Wait()
		for i, ctx := range ctxs {
			if ctx != l.Context() {
				t.Fatalf("caller %d got another context than the lease keeps", i)
			}
			if !errors.Is(context.Cause(ctx), ErrReleased) {
				t.Fatalf("caller %d: context.Cause = %v; want ErrReleased", i, context.Cause(ctx))
			}
		}
	}
}
