package lease

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unstartedManager is a Manager that never talks to Redis: enough for a
// lease's own state, which end changes without a call.
func unstartedManager(t *testing.T) *Manager {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	m, err := New(c, testConfig())
	require.NoError(t, err, "New")
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
	}{
		{"released, asked before", true, ErrReleased},
		{"released, asked after", false, ErrReleased},
		{"lost, asked before", true, errTaken},
		{"lost, asked after", false, errTaken},
		{"left to expire, asked after", false, ErrLeftToExpire},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := unstartedManager(t).newLease("r1", 1, &session{epoch: 1, prefix: "n|1|"})
			if tt.askBefore {
				require.NoError(t, l.Context().Err(), "Context().Err() before the end")
			}
			require.True(t, l.end(tt.cause), "end: want true (the first end)")
			require.False(t, l.end(ErrReleased), "second end")
			assert.ErrorIs(t, context.Cause(l.Context()), tt.cause, "context.Cause")
			assert.Same(t, l.Context(), l.Context(), "Context() gave two contexts; want one")
		})
	}
}

// Callers asking for the context while the lease ends all get one
// context, and it ends with the lease.
func TestSignalsRaceTheEnd(t *testing.T) {
	for range 50 {
		l := unstartedManager(t).newLease("r1", 1, &session{epoch: 1, prefix: "n|1|"})
		const callers = 4
		ctxs := make([]context.Context, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { ctxs[i] = l.Context() })
		}
		wg.Go(func() { l.end(ErrReleased) })
		wg.Wait()
		for i, ctx := range ctxs {
			require.Same(t, l.Context(), ctx, "caller %d got another context than the lease keeps", i)
			require.ErrorIs(t, context.Cause(ctx), ErrReleased, "caller %d: context.Cause", i)
		}
	}
}

// TestLosingASessionWaitsUntilEveryHolderIsTold: a lease another goroutine
// is ending (a Release, say) has left the held state, and its context and
// hooks may not have run yet. Losing its session, or stopping, must wait
// until they have: the next epoch or the session's end frees the room in
// Redis, and the holder must have been told, and OnEnd have returned,
// first (an audit log written there never shows the next owner first).
func TestLosingASessionWaitsUntilEveryHolderIsTold(t *testing.T) {
	for _, how := range []string{"lost", "stopped"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := unstartedManager(t)
				onEnd := make(chan struct{})
				m.cfg.OnEnd = func(*Lease, error) { <-onEnd }
				s := &session{epoch: 7, prefix: m.routePrefixOf(7)}
				m.okAt.Store(new(time.Now()))
				m.sess.Store(s)
				l := m.newLease("ending", 1, s)
				m.leases[l.ID()] = l
				ctx := l.Context()
				// Another goroutine won the end and has not yet told the holder.
				require.True(t, l.state.CompareAndSwap(stateHeld, stateEnded))
				returned := make(chan struct{})
				go func() {
					defer close(returned)
					if how == "lost" {
						m.loseSession(7, lostError("test"))
						return
					}
					sctx, cancel := context.WithTimeout(context.Background(), time.Millisecond) // the session's end in Redis fails here: no server
					defer cancel()
					_ = m.Stop(sctx)
				}()
				synctest.Wait()
				require.False(t, isClosed(returned), "%s before the ending lease's holder was told (its context err %v)", how, ctx.Err())
				go l.finish(ErrReleased) // the other goroutine goes on: the context, then OnEnd
				synctest.Wait()
				require.ErrorIs(t, context.Cause(ctx), ErrReleased)
				require.False(t, isClosed(returned), "%s while the ending lease's OnEnd runs", how)
				close(onEnd)
				synctest.Wait()
				require.True(t, isClosed(returned), "%s did not return once OnEnd did", how)
			})
		})
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// An acquisition that finds no session waits for the next one at most a
// TTL, whatever its caller's ctx, returns at once when one starts, and
// gives up at once when the manager stops, the drain flips or every caller
// left (a review found it waiting out the TTL after the flip, with a
// request in flight waiting for it).
func TestWaitingForASessionIsBounded(t *testing.T) {
	for _, how := range []string{"none starts", "stopped", "started", "the flip", "every caller left"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := unstartedManager(t)
				m.running, m.stopReq = true, make(chan struct{}) // lost (no session), not started again
				start := time.Now()
				var err error
				returned := make(chan struct{})
				f := &flight{waiters: 1}
				go func() {
					defer close(returned)
					_, err = m.currentSession(context.Background(), f)
				}()
				synctest.Wait()
				require.False(t, isClosed(returned), "currentSession returned before a session or a stop")
				if how == "started" {
					m.makeCurrent(7, time.Now())
					synctest.Wait()
					require.True(t, isClosed(returned), "currentSession still waits once a session started")
					require.NoError(t, err)
					require.Zero(t, time.Since(start), "the start ends the wait at once")
					return
				}
				switch how {
				case "the flip":
					m.BeginDrain()
					synctest.Wait()
					require.True(t, isClosed(returned), "currentSession still waits after the flip")
					require.ErrorIs(t, err, ErrDraining)
					return
				case "every caller left":
					require.True(t, m.leave(f), "the caller left")
					synctest.Wait()
					require.True(t, isClosed(returned), "currentSession still waits with no caller left")
					require.ErrorIs(t, err, errNobodyWaits)
					return
				}
				if how == "stopped" {
					m.mu.Lock()
					m.running = false
					close(m.stopReq)
					m.mu.Unlock()
					synctest.Wait()
					require.True(t, isClosed(returned), "currentSession still waits after the stop")
					require.ErrorIs(t, err, ErrNotRunning)
					require.Zero(t, time.Since(start), "the stop ends the wait at once")
					return
				}
				<-returned
				require.ErrorIs(t, err, ErrLost, "past the TTL the session is lost, not the caller's time")
				require.NotErrorIs(t, err, context.DeadlineExceeded)
				require.Equal(t, m.cfg.TTL, time.Since(start), "the wait's bound: TTL")
			})
		})
	}
}
