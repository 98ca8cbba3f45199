package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/internal/testlog"
	"github.com/drainkit/drainkit/lifecycle"
)

// harness is a Manager fed by a signal channel, with its log captured.
type harness struct {
	*lifecycle.Manager
	sig  chan os.Signal
	logs *bytes.Buffer
}

func newHarness(t *testing.T, cfg lifecycle.Config) *harness {
	t.Helper()
	h := &harness{sig: make(chan os.Signal, 3), logs: &bytes.Buffer{}}
	log := slog.New(slog.NewJSONHandler(&lockedWriter{w: h.logs}, nil))
	cfg.Logger = log
	cfg.Signals = h.sig
	m, err := lifecycle.New(cfg)
	require.NoError(t, err)
	h.Manager = m
	return h
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (h *harness) run() <-chan *lifecycle.Report {
	out := make(chan *lifecycle.Report, 1)
	go func() { out <- h.Run(context.Background()) }()
	return out
}

func TestTransitionsAreChecked(t *testing.T) {
	h := newHarness(t, lifecycle.Config{})
	assert.Equal(t, lifecycle.Starting, h.State())
	require.NoError(t, h.MarkRunning())
	err := h.MarkRunning()
	require.Error(t, err)
	assert.Equal(t, "lifecycle: illegal transition running → running", err.Error())
}

func TestListenersRunAtTheFlipBeforeTheDelayAndHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{DrainTimeout: 30 * time.Second, DrainDelay: 5 * time.Second})
		var trace []string
		var flipAt time.Time
		h.OnTransition(func(tr lifecycle.Transition) {
			if tr.To == lifecycle.Draining {
				flipAt = time.Now()
				trace = append(trace, "first listener sees "+h.State().String())
			}
		})
		h.OnTransition(func(tr lifecycle.Transition) {
			trace = append(trace, "second listener: "+tr.From.String()+"→"+tr.To.String())
		})
		var intakeAt time.Time
		require.NoError(t, h.AddHook(drain.Hook{Name: "intake", Phase: drain.StopIntake, Run: func(context.Context) error {
			intakeAt = time.Now()
			trace = append(trace, "hook")
			return nil
		}}))
		reports := h.run()
		synctest.Wait()
		require.Equal(t, lifecycle.Running, h.State())
		start := time.Now()
		h.sig <- syscall.SIGTERM
		r := <-reports
		assert.Equal(t, []string{
			"second listener: starting→running",
			"first listener sees draining",
			"second listener: running→draining",
			"hook",
			"second listener: draining→stopped",
		}, trace)
		assert.Equal(t, start, flipAt, "the flip happens at the signal")
		assert.Equal(t, 5*time.Second, intakeAt.Sub(flipAt), "intake stops after the propagation delay")
		assert.Equal(t, lifecycle.ExitClean, r.ExitCode)
		assert.Equal(t, "signal: terminated", r.Reason)
		assert.Equal(t, lifecycle.Stopped, h.State())
	})
}

func TestAdaptiveDelay(t *testing.T) {
	tests := []struct {
		name     string
		arrivals []time.Duration // after the flip
		want     time.Duration   // from the flip to StopIntake
	}{
		{"no traffic: the floor", nil, 1 * time.Second},
		{"traffic stops early: quiet window after the last", []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond}, 3500 * time.Millisecond},
		{"traffic never stops: capped at DRAIN_DELAY", everyTenth(10 * time.Second), 8 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, lifecycle.Config{DrainTimeout: 30 * time.Second, DrainDelay: 8 * time.Second,
					QuietWindow: 2 * time.Second, DelayFloor: time.Second})
				var flipAt, intakeAt time.Time
				h.OnTransition(func(tr lifecycle.Transition) {
					if tr.To == lifecycle.Draining {
						flipAt = time.Now()
					}
				})
				require.NoError(t, h.AddHook(drain.Hook{Name: "intake", Phase: drain.StopIntake, Run: func(context.Context) error {
					intakeAt = time.Now()
					return nil
				}}))
				tr := h.Tracker()
				stop := make(chan struct{})
				go func() { // a client keeps sending while the load balancer has not noticed
					start := time.Now()
					for _, at := range tt.arrivals {
						select {
						case <-stop:
							return
						case <-time.After(time.Until(start.Add(at))):
						}
						if tr.Begin() {
							tr.End()
						}
					}
				}()
				require.NoError(t, h.MarkRunning())
				h.Shutdown(context.Background(), "test")
				close(stop)
				synctest.Wait()
				if got := intakeAt.Sub(flipAt); got != tt.want {
					t.Errorf("delay = %v; want %v", got, tt.want)
				}
			})
		})
	}
}

func everyTenth(d time.Duration) []time.Duration {
	var out []time.Duration
	for at := time.Duration(0); at < d; at += 100 * time.Millisecond {
		out = append(out, at)
	}
	return out
}

func TestDeadlineAbandonsHungHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{DrainTimeout: 10 * time.Second, DrainDelay: 2 * time.Second})
		release := make(chan struct{})
		require.NoError(t, h.AddHook(
			drain.Hook{Name: "snapshot", Phase: drain.Flush, Run: func(context.Context) error { <-release; return nil }},
			drain.Hook{Name: "redis", Phase: drain.Close, Run: func(context.Context) error { return nil }},
		))
		reports := h.run()
		synctest.Wait()
		start := time.Now()
		h.sig <- syscall.SIGTERM
		r := <-reports
		// drain.Run gives a hook 20 ms to return after its context ended.
		assert.Equal(t, 10*time.Second+20*time.Millisecond, time.Since(start), "the whole budget, delay included, is DRAIN_TIMEOUT, and drain.Run's 20 ms for the hung hook")
		assert.Equal(t, lifecycle.ExitDeadline, r.ExitCode)
		snap, _ := r.Hook("snapshot")
		assert.Equal(t, drain.TimedOut, snap.Outcome)
		assert.NotEmpty(t, snap.Stack)
		redis, _ := r.Hook("redis")
		assert.Equal(t, drain.Skipped, redis.Outcome)
		close(release)
		synctest.Wait()
	})
}

func TestSecondSignalForces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{DrainTimeout: 30 * time.Second, DrainDelay: time.Second})
		inFlight := make(chan struct{})
		require.NoError(t, h.AddHook(drain.Hook{Name: "wait", Phase: drain.WaitInFlight, Run: func(ctx context.Context) error {
			close(inFlight)
			<-ctx.Done() // a well-behaved hook stops when its context is cancelled
			return ctx.Err()
		}}))
		reports := h.run()
		synctest.Wait()
		h.sig <- syscall.SIGTERM
		<-inFlight
		start := time.Now()
		h.sig <- syscall.SIGTERM
		r := <-reports
		assert.Equal(t, time.Duration(0), time.Since(start), "a forced drain returns at once")
		assert.Equal(t, lifecycle.ExitForced, r.ExitCode)
		assert.True(t, r.Forced)
		w, _ := r.Hook("wait")
		assert.Equal(t, drain.Canceled, w.Outcome, "it ran and the force cut it short")
	})
}

// A third signal makes Run return ExitForced at once, even while a start
// step ignores its context (a drain abandons such a hook by itself, a
// start step it must wait for); the caller exits. Run never ends the
// process itself.
func TestThirdSignalReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{})
		release, inStep := make(chan struct{}), make(chan struct{})
		h.OnStart(func(context.Context) error {
			close(inStep)
			<-release // ignores its context
			return nil
		})
		reports := h.run()
		<-inStep
		h.sig <- syscall.SIGTERM
		h.sig <- syscall.SIGTERM
		synctest.Wait()
		time.Sleep(300 * time.Millisecond) // the forced drain waits for the start step
		start := time.Now()
		h.sig <- syscall.SIGTERM
		r := <-reports
		assert.Equal(t, time.Duration(0), time.Since(start), "at once")
		assert.Equal(t, 300*time.Millisecond, r.Duration, "from the stop request to the third signal")
		assert.Equal(t, lifecycle.ExitForced, r.ExitCode)
		assert.True(t, r.Forced)
		assert.Contains(t, r.Reason, "signal: terminated")
		assert.Contains(t, r.Reason, "third signal")
		assert.Empty(t, r.Hooks, "the drain was not waited for")
		line := reportLine(t, h.logs.String()) // written before Run returned
		assert.Equal(t, "ERROR", line["level"])
		assert.EqualValues(t, lifecycle.ExitForced, line["exit_code"])
		assert.Contains(t, line["report"].(map[string]any)["reason"], "third signal")
		close(release) // the drain goes on in the background until the process exits; here, until the bubble ends
		synctest.Wait()
		assert.Equal(t, 1, strings.Count(h.logs.String(), `"msg":"drain report"`),
			"report lines once the drain in the background ended too; want the third signal's only")
	})
}

// Signals that come once the drain's phases are over, while the work
// after them runs (fx's OnStop hooks), say so: the second forces nothing,
// and the third's report keeps the drain's results.
func TestSignalsAfterTheDrainSayWhatTheyDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{Service: "api", NodeID: "n1"})
		noop := func(context.Context) error { return nil }
		require.NoError(t, h.AddHook(drain.Hook{Name: "api.stop_intake", Phase: drain.StopIntake, Run: noop}))
		after, release := make(chan struct{}), make(chan struct{})
		h.OnDrained(func() []drain.HookResult {
			close(after)
			<-release // a hung OnStop hook
			return nil
		})
		reports := h.run()
		synctest.Wait()
		h.sig <- syscall.SIGTERM
		<-after
		h.sig <- syscall.SIGTERM
		synctest.Wait()
		h.sig <- syscall.SIGTERM
		r := <-reports
		assert.Equal(t, lifecycle.ExitForced, r.ExitCode)
		assert.Contains(t, r.Reason, "third signal: the work after the drain not waited for")
		require.Len(t, r.Hooks, 1, "the drain's results stand")
		assert.Equal(t, drain.OK, r.Hooks[0].Outcome)
		logs := h.logs.String()
		assert.Contains(t, logs, `"msg":"second signal after the drain: the work after it`)
		assert.NotContains(t, logs, `"msg":"second signal: forcing the drain"`)
		assert.Contains(t, logs, `"msg":"third signal: returning now, without waiting for the drain","service":"api","node_id":"n1"`)
		close(release)
	})
}

// A caller's Signals channel that is closed (its own source ended) is no
// signal: reading it must neither crash nor count as three signals.
func TestAClosedSignalsChannelIsNoSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sig := make(chan os.Signal)
		m, err := lifecycle.New(lifecycle.Config{DrainDelay: time.Second, Signals: sig})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		reports := make(chan *lifecycle.Report, 1)
		go func() { reports <- m.Run(ctx) }()
		synctest.Wait()
		close(sig)
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, lifecycle.Running, m.State(), "a minute after the Signals channel closed")
		cancel()
		r := <-reports
		assert.Equal(t, lifecycle.ExitClean, r.ExitCode, "stopped by its context: %s", r.Reason)
	})
}

func TestSignalDuringStartAbortsAndStopsWhatStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{DrainTimeout: 10 * time.Second, DrainDelay: time.Second})
		var stopped []string
		var stoppedAt time.Time
		h.OnStart(func(ctx context.Context) error {
			return h.AddHook(drain.Hook{Name: "db.close", Phase: drain.Close, Run: func(context.Context) error {
				stopped = append(stopped, "db")
				stoppedAt = time.Now()
				return nil
			}}, drain.Hook{Name: "rooms.flush", Phase: drain.Flush, Run: func(context.Context) error {
				stopped = append(stopped, "flushed") // state a later step was to load
				return nil
			}})
		})
		second := make(chan struct{})
		h.OnStart(func(ctx context.Context) error {
			close(second)
			<-ctx.Done() // a slow start (warming a cache) honours cancellation
			return ctx.Err()
		})
		thirdRan := false
		h.OnStart(func(ctx context.Context) error { thirdRan = true; return nil })
		var states []string
		h.OnTransition(func(tr lifecycle.Transition) { states = append(states, tr.To.String()) })

		reports := h.run()
		<-second
		signalled := time.Now()
		h.sig <- syscall.SIGTERM
		r := <-reports
		assert.Equal(t, []string{"db"}, stopped, "what started is stopped, and nothing flushed: nothing was served")
		require.Len(t, r.Hooks, 2)
		assert.Equal(t, "rooms.flush", r.Hooks[0].Name)
		assert.Equal(t, drain.Skipped, r.Hooks[0].Outcome, "the flush hook, reported")
		assert.Equal(t, "the start was aborted, so nothing was served to flush: signal: terminated", r.Hooks[0].Error)
		var phases []string // the phase lines, in the log's order
		phaseLine := regexp.MustCompile(`"msg":"(drain phase[a-z ]*)".*"phase":"([a-z_]+)"`)
		for _, line := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
			if m := phaseLine.FindStringSubmatch(line); m != nil {
				phases = append(phases, m[1]+" "+m[2])
			}
		}
		assert.Equal(t, []string{"drain phase skipped flush", "drain phase close"}, phases, "the skipped flush where it would have run")
		assert.Equal(t, signalled, stoppedAt, "no propagation delay: the process was never ready")
		assert.False(t, thirdRan, "start steps after the signal are skipped")
		assert.Equal(t, []string{"draining", "stopped"}, states, "never Running")
		assert.Equal(t, lifecycle.ExitClean, r.ExitCode)
		assert.Empty(t, r.StartError)
	})
}

func TestStartFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{DrainDelay: time.Second})
		h.OnStart(func(context.Context) error { return errors.New("redis: connection refused") })
		r := h.Run(context.Background())
		assert.Equal(t, lifecycle.ExitStartFailed, r.ExitCode)
		assert.Contains(t, r.StartError, "redis: connection refused")
		assert.Contains(t, r.Reason, "start failed")
	})
}

func TestContextEndsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{DrainDelay: time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		out := make(chan *lifecycle.Report, 1)
		go func() { out <- h.Run(ctx) }()
		synctest.Wait()
		cancel()
		r := <-out
		assert.Equal(t, "context: context canceled", r.Reason)
		assert.Equal(t, lifecycle.ExitClean, r.ExitCode)
	})
}

func TestAddHookRejects(t *testing.T) {
	h := newHarness(t, lifecycle.Config{})
	ok := drain.Hook{Name: "a", Phase: drain.Flush, Run: func(context.Context) error { return nil }}
	require.NoError(t, h.AddHook(ok))
	assert.ErrorContains(t, h.AddHook(ok), `hook "a" added twice`)
	assert.ErrorIs(t, h.AddHook(ok), lifecycle.ErrConfig, "fxmodule.Run exits 78 on a hook named twice")
	assert.ErrorContains(t, h.AddHook(drain.Hook{Name: "b", Phase: drain.Flush}), "Run is nil")
}

func TestLogsOneLinePerTransitionAndOneReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{Service: "room-service", NodeID: "n1", DrainDelay: time.Second})
		reports := h.run()
		synctest.Wait()
		h.sig <- syscall.SIGTERM
		<-reports
		var transitions, reportLines int
		for _, line := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec))
			switch rec["msg"] {
			case "state transition":
				transitions++
				for _, k := range []string{"service", "node_id", "old_status", "new_status", "reason", "duration_ms"} {
					assert.Contains(t, rec, k)
				}
			case "drain report":
				reportLines++
				rep := rec["report"].(map[string]any)
				assert.Equal(t, "room-service", rep["service"])
				assert.EqualValues(t, 0, rep["exit_code"])
			}
		}
		assert.Equal(t, 3, transitions)
		assert.Equal(t, 1, reportLines)
	})
}

// A stop racing the end of start-up: the listener is still running for
// Starting→Running when Shutdown flips to Draining. Every listener must
// still see the transitions in the order the state changed, once each.
func TestListenersSeeTransitionsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := lifecycle.New(lifecycle.Config{Service: "svc", NodeID: "n1", Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		var (
			mu   sync.Mutex
			seen = map[string][]lifecycle.Transition{}
		)
		record := func(name string) func(lifecycle.Transition) {
			return func(tr lifecycle.Transition) {
				mu.Lock()
				seen[name] = append(seen[name], tr)
				mu.Unlock()
			}
		}
		inRunning, release := make(chan struct{}), make(chan struct{})
		m.OnTransition(record("first"))
		m.OnTransition(func(tr lifecycle.Transition) {
			if tr.To == lifecycle.Running {
				close(inRunning)
				<-release // still delivering Running when the stop comes
			}
		})
		m.OnTransition(record("last"))

		marked := make(chan error, 1)
		go func() { marked <- m.MarkRunning() }()
		<-inRunning
		stopped := make(chan *lifecycle.Report, 1)
		go func() { stopped <- m.Shutdown(context.Background(), "test") }()
		synctest.Wait() // Shutdown has gone as far as it can
		close(release)
		require.NoError(t, <-marked)
		<-stopped

		for _, name := range []string{"first", "last"} {
			var got []string
			for _, tr := range seen[name] {
				got = append(got, tr.From.String()+"→"+tr.To.String())
			}
			assert.Equal(t, []string{"starting→running", "running→draining", "draining→stopped"}, got, "listener %s", name)
		}
	})
}

// Work after the drain runs even when the drain was forced, and its
// results are in the report and decide the exit code like any hook's.
func TestAfterDrainRunsAndIsReported(t *testing.T) {
	tests := []struct {
		name     string
		force    bool
		give     drain.Outcome
		wantCode int
	}{
		{"clean", false, drain.OK, lifecycle.ExitClean},
		{"after-drain work failed", false, drain.Failed, lifecycle.ExitHookFailed},
		{"forced drain", true, drain.OK, lifecycle.ExitForced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ran := 0
				m, err := lifecycle.New(lifecycle.Config{Service: "svc", NodeID: "n1", Logger: slog.New(slog.DiscardHandler)})
				require.NoError(t, err)
				m.OnDrained(func() []drain.HookResult {
					ran++
					return []drain.HookResult{{Name: "close-client", Phase: drain.Close, Outcome: tt.give}}
				})
				require.NoError(t, m.MarkRunning())
				if tt.force {
					m.Force("second signal")
				}
				r := m.Shutdown(context.Background(), "test")
				assert.Equal(t, 1, ran)
				require.NotEmpty(t, r.Hooks)
				assert.Equal(t, "close-client", r.Hooks[len(r.Hooks)-1].Name)
				assert.Equal(t, tt.wantCode, r.ExitCode)
			})
		})
	}
}

// The transition to Stopped carries the drain's report, from the stop
// request on and before the after-drain work; no other transition has one.
func TestStoppedTransitionCarriesTheDrainReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		afterRan := false
		m, err := lifecycle.New(lifecycle.Config{Service: "svc", NodeID: "n1", DrainDelay: time.Second, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		m.OnDrained(func() []drain.HookResult {
			afterRan = true
			return []drain.HookResult{{Name: "fx.OnStop close", Phase: drain.Close, Outcome: drain.OK}}
		})
		var got []lifecycle.Transition
		var hooks []string
		m.OnTransition(func(tr lifecycle.Transition) {
			got = append(got, tr)
			if tr.Report != nil {
				assert.False(t, afterRan, "the report comes before the after-drain work")
				for _, h := range tr.Report.Hooks {
					hooks = append(hooks, h.Name)
				}
			}
		})
		require.NoError(t, m.AddHook(drain.Hook{Name: "flush", Phase: drain.Flush, Run: func(context.Context) error { return nil }}))
		require.NoError(t, m.MarkRunning())
		stopAt := time.Now()
		r := m.Shutdown(context.Background(), "test")

		require.Len(t, got, 3)
		for _, tr := range got[:2] {
			assert.Nil(t, tr.Report, "%s → %s", tr.From, tr.To)
		}
		stopped := got[2]
		assert.Equal(t, lifecycle.Stopped, stopped.To)
		require.NotNil(t, stopped.Report)
		assert.Equal(t, []string{"flush"}, hooks)
		assert.Equal(t, stopAt, stopped.Report.Start, "from the stop request")
		assert.GreaterOrEqual(t, stopped.Report.Duration, time.Second, "the propagation delay included")
		assert.Equal(t, "fx.OnStop close", r.Hooks[len(r.Hooks)-1].Name, "the final report has the after-drain work")
	})
}

// A nil function is refused where it is registered, naming the method, as
// net/http's HandleFunc refuses a nil handler, not by a panic when it is
// called mid-start or mid-drain.
func TestRegisteringANilFunctionPanicsAtOnce(t *testing.T) {
	h := newHarness(t, lifecycle.Config{})
	tests := []struct {
		name string
		give func()
		want string
	}{
		{"OnStart", func() { h.OnStart(nil) }, "lifecycle: OnStart: nil step"},
		{"OnTransition", func() { h.OnTransition(nil) }, "lifecycle: OnTransition: nil listener"},
		{"OnDrained", func() { h.OnDrained(nil) }, "lifecycle: OnDrained: nil function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.give)
		})
	}
	// None of them was added: the drain calls no nil function.
	r := h.Shutdown(context.Background(), "test")
	assert.Equal(t, lifecycle.ExitStartFailed, r.ExitCode, "exit code of a drain while Starting")
}

// The Stopped transition says how the drain ended, as the exit code does:
// a failed start or a forced drain does not read as a drain.
func TestStoppedTransitionSaysHowTheDrainEnded(t *testing.T) {
	tests := []struct {
		name  string
		start func(context.Context) error
		force bool
		want  string
	}{
		{name: "drained", want: "drained"},
		{name: "start failed", start: func(context.Context) error { return errors.New("port taken") }, want: "start failed"},
		{name: "forced", force: true, want: "forced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, lifecycle.Config{DrainTimeout: 30 * time.Second, DrainDelay: time.Second})
				var stopped lifecycle.Transition
				h.OnTransition(func(tr lifecycle.Transition) {
					if tr.To == lifecycle.Stopped {
						stopped = tr
					}
				})
				if tt.start != nil {
					h.OnStart(tt.start)
				}
				inFlight := make(chan struct{})
				require.NoError(t, h.AddHook(drain.Hook{Name: "wait", Phase: drain.WaitInFlight, Run: func(ctx context.Context) error {
					close(inFlight)
					if tt.force {
						<-ctx.Done()
					}
					return ctx.Err()
				}}))
				reports := h.run()
				synctest.Wait()
				if tt.start == nil {
					h.sig <- syscall.SIGTERM
				}
				<-inFlight
				if tt.force {
					h.sig <- syscall.SIGTERM
				}
				r := <-reports
				assert.Equal(t, tt.want, stopped.Reason, "the Stopped transition's reason (exit code %d)", r.ExitCode)
				assert.Contains(t, h.logs.String(), `"new_status":"stopped","reason":"`+tt.want+`"`, "the transition log line")
			})
		})
	}
}

// A failed start drains what started but flushes nothing: the process
// never served, and a flush hook would write out state its start may not
// have loaded. The flush hook is reported skipped, saying why; the others
// run.
func TestFailedStartSkipsFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{DrainTimeout: 30 * time.Second, DrainDelay: time.Second})
		ran := map[string]bool{}
		for _, hk := range []drain.Hook{
			{Name: "api.stop_intake", Phase: drain.StopIntake},
			{Name: "store.flush", Phase: drain.Flush},
			{Name: "db.close", Phase: drain.Close},
		} {
			name := hk.Name
			hk.Run = func(context.Context) error { ran[name] = true; return nil }
			require.NoError(t, h.AddHook(hk))
		}
		h.OnStart(func(context.Context) error { return errors.New("loading the store: connection refused") })
		r := h.Run(context.Background())

		assert.Equal(t, lifecycle.ExitStartFailed, r.ExitCode)
		assert.Equal(t, map[string]bool{"api.stop_intake": true, "db.close": true}, ran, "hooks that ran")
		var order []string
		for _, res := range r.Hooks {
			order = append(order, res.Name)
		}
		assert.Equal(t, []string{"api.stop_intake", "store.flush", "db.close"}, order, "the report lists the hooks by phase")
		flush, ok := r.Hook("store.flush")
		require.True(t, ok)
		assert.Equal(t, drain.Skipped, flush.Outcome)
		assert.Contains(t, flush.Error, "the start failed, so nothing was served to flush: ")
		assert.Contains(t, flush.Error, "connection refused")
	})
}

// Report is nil until the drain has finished, read while it runs (with
// -race), and then the report Run returned.
func TestReportIsTheFinishedDrainsReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{DrainDelay: time.Second})
		inHook, proceed := make(chan struct{}), make(chan struct{})
		require.NoError(t, h.AddHook(drain.Hook{Name: "flush", Phase: drain.Flush, Run: func(context.Context) error {
			close(inHook)
			<-proceed
			return nil
		}}))
		reports := h.run()
		synctest.Wait()
		assert.Nil(t, h.Report(), "running")
		h.sig <- syscall.SIGTERM
		<-inHook
		assert.Nil(t, h.Report(), "draining")
		close(proceed)
		r := <-reports
		assert.Same(t, r, h.Report())
		assert.Same(t, r, h.Shutdown(context.Background(), "again"), "a later Shutdown drains nothing more")
	})
}

// A signal during start-up is logged when it comes: the flip waits for the
// start step, and a step that does not honour its context (a call to a hung
// server bounded only by its deadline) would leave the operator with no
// line at all until it returns.
func TestASignalDuringStartIsLoggedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{Service: "svc", NodeID: "n1", DrainDelay: time.Second})
		inStep, release := make(chan struct{}), make(chan struct{})
		h.OnStart(func(context.Context) error {
			close(inStep)
			<-release // ignores its context
			return nil
		})
		reports := h.run()
		<-inStep
		h.sig <- syscall.SIGTERM
		synctest.Wait()
		assert.Contains(t, h.logs.String(), "stop requested during start-up", "logged while the step still runs")
		assert.Contains(t, h.logs.String(), `"service":"svc","node_id":"n1","signal"`, "the line's service and node id")
		assert.Equal(t, lifecycle.Starting, h.State())
		close(release)
		assert.Equal(t, lifecycle.ExitClean, (<-reports).ExitCode)
	})
}

// A second Run while the first runs starts nothing (the start steps ran
// again beside the first's: a server listening twice, a lease manager
// started twice) and returns the first's report once the drain is done,
// saying so in a WARN: the mistake went unnoticed otherwise.
func TestASecondRunStartsNothingAndReturnsTheFirstsReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sig := make(chan os.Signal, 1)
		var logs testlog.Buffer
		m, err := lifecycle.New(lifecycle.Config{Service: "svc", NodeID: "n1", Signals: sig, DrainDelay: time.Second,
			Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		require.NoError(t, err)
		var starts atomic.Int32
		m.OnStart(func(context.Context) error { starts.Add(1); return nil })
		first, second := make(chan *lifecycle.Report, 1), make(chan *lifecycle.Report, 1)
		go func() { first <- m.Run(context.Background()) }()
		synctest.Wait()
		require.Equal(t, lifecycle.Running, m.State())
		go func() { second <- m.Run(context.Background()) }()
		synctest.Wait()
		assert.EqualValues(t, 1, starts.Load(), "start steps run")
		assert.Equal(t, lifecycle.Running, m.State(), "the first Run's process, after a second Run")
		sig <- syscall.SIGTERM
		r1, r2 := <-first, <-second
		assert.Same(t, r1, r2, "the second Run's report")
		assert.Equal(t, lifecycle.ExitClean, r2.ExitCode)
		assert.Contains(t, logs.String(), `"level":"WARN","msg":"Run called again: it starts nothing and returns the first Run's report","service":"svc","node_id":"n1"`)
	})
}

// A second Run returns at its ctx's end, or at the third signal, when the
// first Run's drain does not end (a start step that ignores its context):
// it waited for that drain alone, however long.
func TestASecondRunReturnsAtItsCtxWhenTheDrainHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sig := make(chan os.Signal, 3)
		m := quietManager(t, lifecycle.Config{Signals: sig})
		hang := make(chan struct{})
		defer close(hang)
		m.OnStart(func(context.Context) error { <-hang; return nil }) // a start step that ignores its ctx
		first := make(chan *lifecycle.Report, 1)
		go func() { first <- m.Run(context.Background()) }()
		synctest.Wait()
		for range 3 {
			sig <- syscall.SIGTERM
			synctest.Wait()
		}
		assert.Equal(t, lifecycle.ExitForced, (<-first).ExitCode, "the first Run, at the third signal")

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r := m.Run(ctx)
		assert.Equal(t, lifecycle.ExitForced, r.ExitCode, "the second Run")
		assert.Contains(t, r.Reason, "Run called again")

		// One signal only: the first Run waits for the hung step; the second returns at its ctx.
		sig2 := make(chan os.Signal, 1)
		m2 := quietManager(t, lifecycle.Config{Signals: sig2})
		m2.OnStart(func(context.Context) error { <-hang; return nil })
		go m2.Run(context.Background())
		synctest.Wait()
		sig2 <- syscall.SIGTERM
		synctest.Wait()
		start := time.Now()
		r = m2.Run(ctx) // ctx ends a second after it was made
		assert.Equal(t, lifecycle.ExitForced, r.ExitCode, "the second Run of a drain that hangs")
		assert.Equal(t, time.Second, time.Since(start), "the second Run returned at its ctx's end")
	})
}

// blockingHandler holds the goroutine that logs msg until release closes.
type blockingHandler struct {
	slog.Handler
	msg     string
	reached chan struct{}
	release chan struct{}
}

func (h *blockingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *blockingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		close(h.reached)
		<-h.release
	}
	return h.Handler.Handle(ctx, r)
}

// A third signal while the drain's report line is being written (the drain
// is over, its report made) returns that report: it returned ExitForced
// and logged a second report line.
func TestThirdSignalWhileTheReportIsLoggedReturnsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sig := make(chan os.Signal, 3)
		h := &blockingHandler{Handler: slog.DiscardHandler, msg: "drain report", reached: make(chan struct{}), release: make(chan struct{})}
		m, err := lifecycle.New(lifecycle.Config{Service: "s", NodeID: "n", Signals: sig, DrainDelay: time.Second, Logger: slog.New(h)})
		require.NoError(t, err)
		reports := make(chan *lifecycle.Report, 1)
		go func() { reports <- m.Run(context.Background()) }()
		synctest.Wait()
		sig <- syscall.SIGTERM
		<-h.reached // the drain is over; its report line is being written
		sig <- syscall.SIGTERM
		sig <- syscall.SIGTERM
		r := <-reports
		assert.Equal(t, lifecycle.ExitClean, r.ExitCode, "the drain's exit code, not the third signal's")
		assert.Same(t, m.Report(), r)
		close(h.release)
	})
}
