package readiness_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// A check's Timeout bounds the check, counted from when its goroutine
// calls Probe: a goroutine the scheduler runs late (a starved process)
// does not fail a check that answers at once, while ReadyTimeout still
// bounds the whole evaluation, late start included.
func TestCheckTimeoutCountsFromProbeCall(t *testing.T) {
	tests := []struct {
		name       string
		late       time.Duration // how late the check's goroutine runs
		slow       time.Duration // how long Probe takes once called
		wantStatus string
		wantMsg    string
	}{
		{name: "on time", wantStatus: readiness.StatusOK},
		{name: "started late, answers at once", late: 3 * readiness.DefaultListenerTimeout / 2, wantStatus: readiness.StatusOK},
		{name: "slow probe", slow: 2 * readiness.DefaultListenerTimeout, wantStatus: readiness.StatusFail, wantMsg: "deadline exceeded"},
		{name: "not started by ReadyTimeout", late: 2 * readiness.DefaultReadyTimeout, wantStatus: readiness.StatusFail, wantMsg: "deadline exceeded (not started)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				restore := readiness.SetProbeStarting(func(name string) {
					if name == "listener" {
						time.Sleep(tt.late)
					}
				})
				r := newRegistry(t, newState(lifecycle.Running), nil)
				mustAdd(t, r, readiness.Check{Name: "listener", Timeout: readiness.DefaultListenerTimeout,
					Probe: func(ctx context.Context) error {
						select {
						case <-time.After(tt.slow):
							return nil
						case <-ctx.Done():
							return ctx.Err()
						}
					}})
				rep := r.Ready(t.Context())
				synctest.Wait() // let a late goroutine finish before the hook is restored
				time.Sleep(tt.late)
				synctest.Wait()
				restore()
				c, _ := findCheck(rep, "listener")
				assert.Equal(t, tt.wantStatus, rep.Status, "status (message %q)", c.Message)
				hasPrefix(t, c.Message, tt.wantMsg, "message (status %s)", rep.Status)
			})
		})
	}
}

// A prober that gives up while the first results are still being
// evaluated gets a failure, but the registry logs no transition to fail
// (and back): it learned nothing about the process.
func TestProberGivingUpIsNoTransition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &logs{}
		r := newRegistry(t, newState(lifecycle.Running), l)
		slow := readiness.DefaultReadyTimeout / 2
		mustAdd(t, r, readiness.Check{Name: "redis", Timeout: readiness.DefaultReadyTimeout, Probe: func(ctx context.Context) error {
			select {
			case <-time.After(slow):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}})
		ctx, cancel := context.WithTimeout(t.Context(), slow/2)
		defer cancel()
		assert.Equal(t, readiness.StatusFail, r.Ready(ctx).Status, "prober that gave up")
		time.Sleep(slow)
		rep := r.Ready(t.Context())
		assert.Equal(t, readiness.StatusOK, rep.Status, "after the evaluation landed (reason %q)", rep.Reason)
		var got []string
		for _, rec := range l.records(t) {
			if rec["msg"] == "readiness changed" {
				got = append(got, fmt.Sprintf("%v->%v", rec["old_status"], rec["new_status"]))
			}
		}
		assert.Equal(t, []string{"unknown->ok"}, got, "transitions logged")
	})
}

// An execution whose goroutine starts after its evaluation's deadline (a
// starved process), joined by the next evaluation, gets its check's own
// budget from its start: it used to inherit the first evaluation's spent
// deadline, and a check that answers at once read "deadline exceeded".
func TestAJoinedLateExecutionGetsItsOwnBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		restore := readiness.SetProbeStarting(func(string) {
			if n.Add(1) == 1 {
				time.Sleep(2 * readiness.DefaultReadyTimeout) // the first execution starts a second late
			}
		})
		defer restore()
		r := newRegistry(t, newState(lifecycle.Running), nil)
		mustAdd(t, r, readiness.Check{Name: "state", Probe: func(ctx context.Context) error { return ctx.Err() }})
		c, _ := findCheck(r.Ready(t.Context()), "state")
		require.True(t, strings.HasPrefix(c.Message, "deadline exceeded (not started)"), "first evaluation: %q", c.Message)
		time.Sleep(200 * time.Millisecond) // the failing result is kept a fifth of CacheTTL
		r.Ready(t.Context())               // the next evaluation joins the late execution
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		rep := r.Ready(t.Context())
		c, _ = findCheck(rep, "state")
		assert.Equal(t, readiness.StatusOK, rep.Status, "status (message %q)", c.Message)
	})
}
