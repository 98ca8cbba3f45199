package drain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
)

func TestRunPhasesInOrderHooksConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			trace []string
		)
		log := func(s string) { mu.Lock(); trace = append(trace, s); mu.Unlock() }
		// Both Flush hooks must be running at once for either to finish:
		// a runner that ran them one after the other would deadlock here.
		var both sync.WaitGroup
		both.Add(2)
		flush := func(name string) drain.Hook {
			return drain.Hook{Name: name, Phase: drain.Flush, Run: func(ctx context.Context) error {
				both.Done()
				both.Wait()
				log(name)
				return nil
			}}
		}
		hook := func(name string, p drain.Phase) drain.Hook {
			return drain.Hook{Name: name, Phase: p, Run: func(context.Context) error { log(name); return nil }}
		}
		// Given out of order on purpose: phases, not registration, decide.
		hooks := []drain.Hook{
			hook("close", drain.Close), flush("flush-a"), hook("intake", drain.StopIntake),
			hook("release", drain.Release), flush("flush-b"), hook("wait", drain.WaitInFlight),
		}
		r := drain.Run(context.Background(), "test", hooks)
		require.NoError(t, r.Err())
		require.Len(t, trace, 6)
		assert.Equal(t, []string{"intake", "wait"}, trace[:2])
		assert.ElementsMatch(t, []string{"flush-a", "flush-b"}, trace[2:4])
		assert.Equal(t, []string{"release", "close"}, trace[4:])
		require.Len(t, r.Hooks, 6)
		for _, h := range r.Hooks {
			assert.Equal(t, drain.OK, h.Outcome, h.Name)
		}
	})
}

func TestRunHookBudgetIsMinOfTimeoutAndDeadline(t *testing.T) {
	tests := []struct {
		name     string
		timeout  time.Duration
		deadline time.Duration
		want     time.Duration
	}{
		{"own timeout shorter", 2 * time.Second, 10 * time.Second, 2 * time.Second},
		{"deadline shorter", 10 * time.Second, 3 * time.Second, 3 * time.Second},
		{"no own timeout", 0, 4 * time.Second, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
				defer cancel()
				ended := make(chan time.Duration, 1)
				start := time.Now()
				r := drain.Run(ctx, "test", []drain.Hook{{Name: "h", Phase: drain.Flush, Timeout: tt.timeout,
					Run: func(ctx context.Context) error {
						<-ctx.Done()
						ended <- time.Since(start)
						return ctx.Err()
					}}})
				if got := <-ended; got != tt.want {
					t.Errorf("hook context ended after %v; want %v", got, tt.want)
				}
				h, _ := r.Hook("h")
				assert.Equal(t, drain.TimedOut, h.Outcome)
			})
		})
	}
}

func TestRunAbandonsHookThatIgnoresContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		r := drain.Run(ctx, "sigterm", []drain.Hook{
			{Name: "stubborn", Phase: drain.Flush, Run: func(context.Context) error {
				<-release // ignores its context
				return nil
			}},
			{Name: "later", Phase: drain.Close, Run: func(context.Context) error { return nil }},
		})
		if got := time.Since(start); got != 5*time.Second+drain.ReturnGrace {
			t.Errorf("Run returned after %v; want 5s (the deadline) and the grace a hook has to return", got)
		}
		h, _ := r.Hook("stubborn")
		assert.Equal(t, drain.TimedOut, h.Outcome)
		assert.Contains(t, h.Stack, "TestRunAbandonsHookThatIgnoresContext", "stack should show where the hook hangs")
		later, _ := r.Hook("later")
		assert.Equal(t, drain.Skipped, later.Outcome)
		assert.True(t, r.DeadlineExceeded)
		assert.False(t, r.Forced)
		close(release) // let the abandoned goroutine end before goleak looks
		synctest.Wait()
	})
}

// A hook that honours its context returns as it ends, a moment later:
// its own error is reported, not "abandoned" with its stack, which read
// as a hook that ignored its context and lost what it said (grpcdrain's
// graceful_stop says what GracefulStop still waits for).
func TestRunReportsWhatAHookSaidAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r := drain.Run(ctx, "sigterm", []drain.Hook{{Name: "flush", Phase: drain.Flush, Run: func(ctx context.Context) error {
			<-ctx.Done()
			return fmt.Errorf("3 rooms not flushed: %w", ctx.Err())
		}}})
		h, _ := r.Hook("flush")
		assert.Equal(t, drain.TimedOut, h.Outcome)
		assert.Equal(t, "3 rooms not flushed: context deadline exceeded", h.Error)
		assert.Empty(t, h.Stack, "a hook that returned has no stack in the report")
		assert.Equal(t, 5*time.Second, h.Duration)
	})
}

func TestRunOwnTimeoutLetsNextPhaseRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ran := false
		r := drain.Run(context.Background(), "test", []drain.Hook{
			{Name: "stubborn", Phase: drain.Flush, Timeout: time.Second, Run: func(context.Context) error { <-release; return nil }},
			{Name: "close", Phase: drain.Close, Run: func(context.Context) error { ran = true; return nil }},
		})
		assert.True(t, ran, "a hook past its own timeout must not hold later phases")
		h, _ := r.Hook("stubborn")
		assert.Equal(t, drain.TimedOut, h.Outcome)
		close(release)
		synctest.Wait()
	})
}

func TestRunOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := drain.Run(context.Background(), "test", []drain.Hook{
			{Name: "ok", Phase: drain.Flush, Run: func(context.Context) error { return nil }},
			{Name: "fails", Phase: drain.Flush, Run: func(context.Context) error { return errors.New("disk full") }},
			{Name: "panics", Phase: drain.Flush, Run: func(context.Context) error { panic("boom") }},
			{Name: "goexits", Phase: drain.Flush, Run: func(context.Context) error { runtime.Goexit(); return nil }}, // t.FailNow in a hook
			{Name: "after", Phase: drain.Close, Run: func(context.Context) error { return nil }},
			{Name: "", Phase: drain.Close, Run: func(context.Context) error { return nil }},
			{Name: "badphase", Phase: drain.Phase("teardown"), Run: func(context.Context) error { return nil }},
			{Name: "nophase", Run: func(context.Context) error { return nil }},
		})
		tests := []struct {
			give    string
			want    drain.Outcome
			wantErr string
		}{
			{"ok", drain.OK, ""},
			{"fails", drain.Failed, "disk full"},
			{"panics", drain.Panicked, "boom"},
			{"goexits", drain.Failed, "exited without returning (runtime.Goexit)"}, // not waited for until a deadline
			{"after", drain.OK, ""},
			{"", drain.Failed, "Name is empty"},
			{"badphase", drain.Failed, `Phase "teardown" is not one of ["stop_intake" "wait_in_flight" "flush" "release" "close"]`},
			{"nophase", drain.Failed, `Phase "" is not one of`},
		}
		for _, tt := range tests {
			h, ok := r.Hook(tt.give)
			require.True(t, ok, "hook %q missing from report", tt.give)
			if h.Outcome != tt.want {
				t.Errorf("hook %q: got %s; want %s", tt.give, h.Outcome, tt.want)
			}
			assert.Contains(t, h.Error, tt.wantErr)
		}
		p, _ := r.Hook("panics")
		assert.Contains(t, p.Stack, "run_test.go")
		assert.ErrorContains(t, r.Err(), `flush hook "fails": failed: disk full`)
	})
}

// A hook that fails Validate is reported Failed with the mistake, also in a
// phase the drain skipped, where it was reported Skipped and the mistake
// hidden behind "drain forced before this phase".
func TestRunReportsAMistakeInASkippedPhase(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := drain.Run(ctx, "test", []drain.Hook{
		{Name: "norun", Phase: drain.Flush},
		{Name: "fine", Phase: drain.Flush, Run: func(context.Context) error { return nil }},
	})
	tests := []struct {
		give    string
		want    drain.Outcome
		wantErr string
	}{
		{"norun", drain.Failed, "Run is nil"},
		{"fine", drain.Skipped, "drain forced before this phase"},
	}
	for _, tt := range tests {
		h, ok := r.Hook(tt.give)
		require.True(t, ok, "hook %q missing from report", tt.give)
		assert.Equal(t, tt.want, h.Outcome, "hook %q", tt.give)
		assert.Contains(t, h.Error, tt.wantErr, "hook %q", tt.give)
	}
}

// A forced drain cancels the hooks that are running and skips the
// phases after: a hook that ran and was cut short is Canceled, with how
// long it ran, whether it returned or was given up on; only a hook that
// never ran is Skipped.
func TestRunForcedCancelsRunningHooksAndSkipsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		r := drain.Run(ctx, "test", []drain.Hook{
			{Name: "wait", Phase: drain.WaitInFlight, Run: func(ctx context.Context) error {
				time.Sleep(500 * time.Millisecond) // in flight for a while (fake clock)
				cancel()                           // a second signal arrives while this hook runs
				<-ctx.Done()
				return ctx.Err()
			}},
			{Name: "stubborn", Phase: drain.WaitInFlight, Run: func(context.Context) error {
				<-release // ignores its context
				return nil
			}},
			{Name: "close", Phase: drain.Close, Run: func(context.Context) error { return nil }},
		})
		assert.True(t, r.Forced)
		tests := []struct {
			give      string
			want      drain.Outcome
			wantErr   string
			wantRan   time.Duration
			wantStack bool
		}{
			// wait returns at once, within the 20 ms Run gives it: its own error.
			{"wait", drain.Canceled, "context canceled", 500 * time.Millisecond, false},
			{"stubborn", drain.Canceled, "abandoned: context canceled", 500 * time.Millisecond, true},
			{"close", drain.Skipped, "drain forced before this phase", 0, false},
		}
		for _, tt := range tests {
			h, ok := r.Hook(tt.give)
			require.True(t, ok, "hook %q missing from report", tt.give)
			if h.Outcome != tt.want {
				t.Errorf("hook %q: got outcome %s; want %s", tt.give, h.Outcome, tt.want)
			}
			if !strings.HasSuffix(h.Error, tt.wantErr) {
				t.Errorf("hook %q: got error %q; want one ending in %q", tt.give, h.Error, tt.wantErr)
			}
			if h.Duration != tt.wantRan {
				t.Errorf("hook %q: got duration %v; want %v", tt.give, h.Duration, tt.wantRan)
			}
			if tt.wantStack && h.Stack == "" {
				t.Errorf("hook %q: got no stack; want where it was abandoned", tt.give)
			}
			if tt.want == drain.Skipped && !h.Start.IsZero() {
				t.Errorf("hook %q: skipped with Start %v; want zero, it never ran", tt.give, h.Start)
			}
		}
		close(release)
		synctest.Wait()
	})
}

// The report line's fields, their order and their forms are what logs and
// dashboards read: durations as duration_ms, a hook's start as start_ms
// from the report's (0 for one that began with it, left out for one that
// never ran), phases and outcomes by name, empty error, stack and streams
// omitted.
func TestReportJSON(t *testing.T) {
	t0 := time.Unix(0, 0).UTC()
	r := &drain.Report{Reason: "signal: terminated", Start: t0, Duration: 1500 * time.Microsecond,
		Hooks: []drain.HookResult{
			{Name: "h", Phase: drain.Flush, Outcome: drain.OK, Start: t0, Duration: 2 * time.Millisecond},
			{Name: "s", Phase: drain.Release, Outcome: drain.TimedOut, Error: "abandoned", Stack: "goroutine 7",
				Start: t0.Add(1250 * time.Microsecond), Duration: time.Second, Streams: &drain.StreamReport{Told: 2, PeakRate: 1.5}},
			{Name: "c", Phase: drain.Close, Outcome: drain.Skipped, Error: "drain forced before this phase"},
		}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	want := `{"reason":"signal: terminated","start":"1970-01-01T00:00:00Z","forced":false,"deadline_exceeded":false,` +
		`"hooks":[{"name":"h","phase":"flush","outcome":"ok","start_ms":0,"duration_ms":2},` +
		`{"name":"s","phase":"release","outcome":"timeout","error":"abandoned","stack":"goroutine 7",` +
		`"streams":{"told":2,"ended":0,"paced":0,"hard":0,"unended":0,"refused":0,"peak_rate":1.5},"start_ms":1.25,"duration_ms":1000},` +
		`{"name":"c","phase":"close","outcome":"skipped","error":"drain forced before this phase","duration_ms":0}],` +
		`"duration_ms":1.5}`
	if got := string(b); got != want {
		t.Errorf("got %s; want %s", got, want)
	}
}

// A hook's start_ms is when Run began it, from the report's Start: a
// reader of the report line alone can tell when each phase began.
func TestReportJSONSaysWhenEachHookBegan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wait := func(d time.Duration) func(context.Context) error {
			return func(context.Context) error { time.Sleep(d); return nil } // synctest's clock: no real wait
		}
		r := drain.Run(t.Context(), "test", []drain.Hook{
			{Name: "stop", Phase: drain.StopIntake, Run: wait(300 * time.Millisecond)},
			{Name: "flush", Phase: drain.Flush, Run: wait(time.Second)},
			{Name: "close", Phase: drain.Close, Run: wait(0)},
		})
		b, err := json.Marshal(r)
		require.NoError(t, err)
		var got struct {
			Hooks []struct {
				Name    string   `json:"name"`
				StartMS *float64 `json:"start_ms"`
			} `json:"hooks"`
		}
		require.NoError(t, json.Unmarshal(b, &got))
		want := map[string]float64{"stop": 0, "flush": 300, "close": 1300}
		require.Len(t, got.Hooks, len(want))
		for _, h := range got.Hooks {
			if h.StartMS == nil {
				t.Errorf("hook %q: no start_ms in %s", h.Name, b)
				continue
			}
			if *h.StartMS != want[h.Name] {
				t.Errorf("hook %q: got start_ms %v; want %v", h.Name, *h.StartMS, want[h.Name])
			}
		}
	})
}

// Abort is called, last hook first, only when the drain is cut short, and
// for every hook that has one, whether it ran or was skipped.
func TestRunAbortsOnlyWhenCutShort(t *testing.T) {
	tests := []struct {
		name      string
		give      func(cancel context.CancelFunc) error // the first hook's Run
		wantAbort []string
	}{
		{"clean drain", func(context.CancelFunc) error { return nil }, nil},
		{"failed hook", func(context.CancelFunc) error { return errors.New("boom") }, nil},
		{"forced", func(cancel context.CancelFunc) error { cancel(); return nil }, []string{"close", "stop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var aborted []string
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				hooks := []drain.Hook{
					{Name: "stop", Phase: drain.StopIntake, Run: func(context.Context) error { return tt.give(cancel) },
						Abort: func() { aborted = append(aborted, "stop") }},
					{Name: "flush", Phase: drain.Flush, Run: func(context.Context) error { return nil }},
					{Name: "close", Phase: drain.Close, Run: func(context.Context) error { return nil },
						Abort: func() { aborted = append(aborted, "close") }},
				}
				drain.Run(ctx, "test", hooks)
				assert.Equal(t, tt.wantAbort, aborted)
			})
		})
	}
}

// A panicking Abort is recorded on its hook and does not stop the others.
func TestRunAbortPanicIsReported(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var second bool
	rep := drain.Run(ctx, "test", []drain.Hook{
		{Name: "a", Phase: drain.StopIntake, Run: func(context.Context) error { return nil }, Abort: func() { second = true }},
		{Name: "b", Phase: drain.Close, Run: func(context.Context) error { return nil }, Abort: func() { panic("oops") }},
	})
	require.Len(t, rep.Hooks, 2)
	assert.Contains(t, rep.Hooks[1].Error, "abort panicked: oops")
	assert.True(t, second, "the other hook's Abort still ran")
}

// Of two hooks of one name, the one whose Abort panicked is the one
// reported; matched by name, the first result of the name got it.
func TestRunAbortPanicOnTheRightHookOfTwoOfOneName(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	noop := func(context.Context) error { return nil }
	rep := drain.Run(ctx, "test", []drain.Hook{
		{Name: "x", Phase: drain.StopIntake, Run: noop, Abort: func() {}},
		{Name: "x", Phase: drain.Close, Run: noop, Abort: func() { panic("oops") }},
	})
	require.Len(t, rep.Hooks, 2)
	assert.NotContains(t, rep.Hooks[0].Error, "abort panicked", "the hook whose Abort returned")
	assert.Contains(t, rep.Hooks[1].Error, "abort panicked: oops")
}
