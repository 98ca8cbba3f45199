package fxmodule_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/fx/fxtest"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/internal/testlog"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// trace records events from fx hooks and drain hooks in order.
type trace struct {
	mu  sync.Mutex
	evs []string
}

func (t *trace) add(s string) { t.mu.Lock(); t.evs = append(t.evs, s); t.mu.Unlock() }
func (t *trace) list() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.evs...)
}

// client stands for a Redis client: the drain uses it, fx closes it.
type client struct{ closed bool }

func newClient(lc fx.Lifecycle, tr *trace, m *lifecycle.Manager) *client {
	c := &client{}
	lc.Append(fx.Hook{OnStop: func(context.Context) error {
		tr.add("client closed while " + m.State().String())
		c.closed = true
		return nil
	}})
	return c
}

func newFlushHook(c *client, tr *trace) drain.Hook {
	return drain.Hook{Name: "flush", Phase: drain.Flush, Run: func(context.Context) error {
		if c.closed {
			return errors.New("client already closed")
		}
		tr.add("flushed")
		return nil
	}}
}

// releaseHook is a hook of a phase a failed start still runs (a failed
// start skips Flush), for the tests of the order of a failed start's drain.
func releaseHook(c *client, tr *trace) drain.Hook {
	return drain.Hook{Name: "release", Phase: drain.Release, Run: func(context.Context) error {
		if c.closed {
			return errors.New("client already closed")
		}
		tr.add("released")
		return nil
	}}
}

// onStopBudget is the fx.StopTimeout of baseOptions: what fx's OnStop
// hooks get after the drain.
const onStopBudget = 5 * time.Second

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func baseOptions(tr *trace, extra ...fx.Option) []fx.Option {
	return append([]fx.Option{
		fxmodule.Module,
		fx.Supply(lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 10 * time.Second}),
		fx.StopTimeout(onStopBudget),
		fx.Supply(quiet(), tr),
		fx.Provide(newClient),
		fx.Provide(fxmodule.AsHook(newFlushHook)),
		fx.Provide(fxmodule.AsCheck(func() readiness.Check {
			return readiness.Check{Name: "db", Tier: readiness.Gating, Probe: func(context.Context) error { return nil }}
		})),
	}, extra...)
}

func TestGroupsAndOrder(t *testing.T) {
	tr := &trace{}
	var (
		m   *lifecycle.Manager
		reg *readiness.Registry
	)
	a := fxmoduletest.Start(t, baseOptions(tr, fx.Populate(&m, &reg))...)
	assert.Equal(t, lifecycle.Running, m.State())
	rep := reg.Ready(context.Background())
	require.Len(t, rep.Checks, 1, "the contributed check is registered")
	assert.Equal(t, "db", rep.Checks[0].Name)
	assert.Equal(t, readiness.StatusOK, rep.Status)

	assert.Equal(t, lifecycle.ExitClean, a.Stop().ExitCode)
	assert.Equal(t, []string{"flushed", "client closed while stopped"}, tr.list(),
		"the drain uses the client before fx closes it")
}

// A constructor of several checks gives each to the ready probe, as a
// constructor of several hooks gives each to the drain.
func TestAsCheckOfASliceAddsEveryCheck(t *testing.T) {
	tr := &trace{}
	var reg *readiness.Registry
	checks := fx.Provide(fxmodule.AsCheck(func() []readiness.Check {
		return []readiness.Check{
			{Name: "cache", Tier: readiness.Gating, Probe: func(context.Context) error { return errors.New("cache down") }},
			{Name: "search", Tier: readiness.Informational, Probe: func(context.Context) error { return nil }},
		}
	}))
	a := fxmoduletest.Start(t, baseOptions(tr, checks, fx.Populate(&reg))...)
	rep := reg.Ready(context.Background())
	var names []string
	for _, c := range rep.Checks {
		names = append(names, c.Name)
	}
	assert.ElementsMatch(t, []string{"db", "cache", "search"}, names)
	assert.Equal(t, readiness.StatusFail, rep.Status, "the failing gating check is one of them")
	assert.Equal(t, lifecycle.ExitClean, a.Stop().ExitCode)
}

// Only Run drives an app with Module: app.Start (here through fxtest)
// would mark the process ready before later OnStart hooks had returned.
func TestModuleRefusesToStartWithoutRun(t *testing.T) {
	tr := &trace{}
	var m *lifecycle.Manager
	listening := false
	late := fx.Invoke(func(lc fx.Lifecycle) {
		lc.Append(fx.Hook{OnStart: func(context.Context) error { listening = true; return nil }})
	})
	app := fxtest.New(t, baseOptions(tr, late, fx.Populate(&m))...)
	err := app.Start(context.Background())
	require.ErrorIs(t, err, fxmodule.ErrNotRun)
	assert.NotEqual(t, lifecycle.Running, m.State(), "never ready")
	assert.False(t, listening, "nothing after Module started")
}

func TestRunDrainsBeforeAnyOnStop(t *testing.T) {
	tr := &trace{}
	sig := make(chan os.Signal, 3)
	running, isRunning := onRunning()
	// A server built by a later Invoke: under plain fx its OnStop would run
	// before Module's; under Run the drain precedes every OnStop.
	late := fx.Invoke(func(lc fx.Lifecycle, m *lifecycle.Manager) {
		lc.Append(fx.Hook{OnStop: func(context.Context) error {
			tr.add("late server stopped while " + m.State().String())
			return nil
		}})
	})
	code := make(chan int, 1)
	go func() {
		code <- fxmodule.Run(baseOptions(tr, late, running,
			signalsFrom(sig))...)
	}()
	<-isRunning
	sig <- syscall.SIGTERM
	assert.Equal(t, lifecycle.ExitClean, <-code)
	assert.Equal(t, []string{"flushed", "late server stopped while stopped", "client closed while stopped"}, tr.list())
}

func TestRunBadConfigIsExitConfig(t *testing.T) {
	code := fxmodule.Run(fxmodule.Module, fx.Supply(quiet()),
		fx.Supply(lifecycle.Config{DrainTimeout: time.Second, DrainDelay: 2 * time.Second}))
	assert.Equal(t, lifecycle.ExitConfig, code)
}

// A bad environment variable read by FromEnv is a bad configuration too,
// refused before anything starts.
func TestRunBadEnvironmentIsExitConfig(t *testing.T) {
	t.Setenv("DRAIN_TIMEOUT", "abc")
	code := fxmodule.Run(fxmodule.Module, fx.Supply(quiet()), fxmodule.FromEnv)
	assert.Equal(t, lifecycle.ExitConfig, code)
}

func TestRunSignalDuringStart(t *testing.T) {
	tr := &trace{}
	sig := make(chan os.Signal, 3)
	starting := make(chan struct{})
	slowStart := fx.Invoke(func(lc fx.Lifecycle, m *lifecycle.Manager) {
		lc.Append(fx.Hook{OnStart: fxmodule.Abortable(m, func(ctx context.Context) error {
			close(starting)
			<-ctx.Done() // warming a cache, honouring cancellation
			tr.add("slow start cancelled")
			return ctx.Err()
		})})
	})
	code := make(chan int, 1)
	go func() {
		code <- fxmodule.Run(baseOptions(tr, slowStart,
			signalsFrom(sig))...)
	}()
	<-starting
	sig <- syscall.SIGTERM
	assert.Equal(t, lifecycle.ExitClean, <-code, "an aborted start that stopped cleanly")
	assert.Equal(t, []string{"slow start cancelled", "client closed while stopped"}, tr.list(),
		"what had started is drained and stopped; no flush hook ran, as the process never served")
}

// A signal during the start aborts it: an OnStart hook that is not
// Abortable runs to its end, but the hooks after it do not begin (a listener
// opened, a loop started, only to be drained at once), and what did start
// is stopped. lifecycle.Run checks for a stop request between its steps;
// fx's start is one step, and fx went on with every hook.
func TestRunSignalDuringStartRunsNoLaterHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &trace{}
		sig := make(chan os.Signal, 3)
		starting, release := make(chan struct{}), make(chan struct{})
		hooks := fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.Hook{
				OnStart: func(context.Context) error { close(starting); <-release; tr.add("first started"); return nil },
				OnStop:  func(context.Context) error { tr.add("first stopped"); return nil },
			})
			lc.Append(fx.Hook{OnStart: func(context.Context) error { tr.add("second started"); return nil }})
		})
		code := make(chan int, 1)
		go func() { code <- fxmodule.Run(baseOptions(tr, hooks, signalsFrom(sig))...) }()
		<-starting
		sig <- syscall.SIGTERM
		synctest.Wait() // the stop request is in
		close(release)
		assert.Equal(t, lifecycle.ExitClean, <-code, "an aborted start that stopped cleanly")
		assert.Equal(t, []string{"first started", "first stopped", "client closed while stopped"}, tr.list())
	})
}

func TestRunSecondSignalForces(t *testing.T) {
	tr := &trace{}
	sig := make(chan os.Signal, 3)
	running, isRunning := onRunning()
	waiting := make(chan struct{})
	hang := fx.Provide(fxmodule.AsHook(func() drain.Hook {
		return drain.Hook{Name: "in-flight", Phase: drain.WaitInFlight, Run: func(ctx context.Context) error {
			close(waiting)
			<-ctx.Done()
			return ctx.Err()
		}}
	}))
	code := make(chan int, 1)
	go func() {
		code <- fxmodule.Run(baseOptions(tr, hang, running,
			signalsFrom(sig))...)
	}()
	<-isRunning
	sig <- syscall.SIGTERM
	<-waiting
	sig <- syscall.SIGTERM
	assert.Equal(t, lifecycle.ExitForced, <-code)
}

// onRunning returns an option whose channel closes when the app's manager
// reaches Running: a transition listener, so nothing polls.
func onRunning() (fx.Option, <-chan struct{}) {
	ch := make(chan struct{})
	return fx.Invoke(func(m *lifecycle.Manager) {
		m.OnTransition(func(t lifecycle.Transition) {
			if t.To == lifecycle.Running {
				close(ch)
			}
		})
	}), ch
}

// A readiness check that ignores its context must not hold the drain to
// its deadline: the registry's close is bounded by HEALTH_READY_TIMEOUT.
func TestHungCheckDoesNotHoldTheDrain(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var reg *readiness.Registry
	hung := fx.Provide(fxmodule.AsCheck(func() readiness.Check {
		return readiness.Check{Name: "hung", Tier: readiness.Informational, Timeout: 100 * time.Millisecond,
			Probe: func(context.Context) error { <-release; return nil }}
	}))
	a := fxmoduletest.Start(t, baseOptions(&trace{}, hung, fx.Populate(&reg))...)
	reg.Ready(context.Background()) // starts the hung check
	began := time.Now()
	r := a.Stop()
	assert.Equal(t, lifecycle.ExitHookFailed, r.ExitCode, "the report says readiness.close did not finish")
	assert.Less(t, time.Since(began), 10*time.Second, "the drain ended before its deadline")
	assert.Equal(t, drain.TimedOut, hookOutcome(r, "readiness.close"))
}

// After a forced drain fx's OnStop hooks still run, with a live context of
// their own, and each one's outcome is in the report.
func TestRunStopsFxAfterForcedDrain(t *testing.T) {
	tr := &trace{}
	waiting := make(chan struct{})
	hang := fx.Provide(fxmodule.AsHook(func() drain.Hook {
		return drain.Hook{Name: "in-flight", Phase: drain.WaitInFlight, Run: func(ctx context.Context) error {
			close(waiting)
			<-ctx.Done()
			return ctx.Err()
		}}
	}))
	var onStopErr error
	failing := fx.Invoke(func(lc fx.Lifecycle) { lc.Append(fx.Hook{OnStop: flushTelemetry(&onStopErr)}) })
	a := fxmoduletest.Start(t, baseOptions(tr, hang, failing)...)
	a.Signal()
	<-waiting
	a.Signal()
	r := a.Wait()
	assert.Equal(t, lifecycle.ExitForced, r.ExitCode)
	assert.NoError(t, onStopErr, "OnStop gets a live context after a forced drain")
	assert.Contains(t, tr.list(), "client closed while stopped", "the client is closed")
	assert.Equal(t, drain.Failed, hookOutcome(r, "TestRunStopsFxAfterForcedDrain"), "named after what appended it")
	assert.Equal(t, drain.OK, hookOutcome(r, "newClient"))
	assert.Empty(t, hookOutcome(r, "fx.OnStop github.com/drainkit/drainkit/fxmodule."), "the drain is not listed twice")
}

// flushTelemetry is an OnStop hook that fails; it keeps its context's error.
func flushTelemetry(ctxErr *error) func(context.Context) error {
	return func(ctx context.Context) error {
		*ctxErr = ctx.Err()
		return errors.New("flush telemetry: broken pipe")
	}
}

// An OnStop hook that ignores its context is abandoned at fx's StopTimeout: it
// cannot keep the process alive, and the report names it.
func TestRunAbandonsHungOnStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		hung := fx.Invoke(func(lc fx.Lifecycle) { lc.Append(fx.Hook{OnStop: waitFor(release)}) })
		a := fxmoduletest.Start(t, baseOptions(&trace{}, hung)...)
		began := time.Now()
		r := a.Stop()
		assert.Equal(t, lifecycle.ExitHookFailed, r.ExitCode)
		assert.Equal(t, onStopBudget, time.Since(began), "given its whole budget, and not a moment more")
		assert.Equal(t, drain.TimedOut, hookOutcome(r, "TestRunAbandonsHungOnStop"))
		assert.Equal(t, drain.Skipped, hookOutcome(r, "newClient"), "the client's OnStop, which fx never began: in the report")
	})
}

// A panicking OnStop hook is reported as a drain hook's would be (outcome
// panic, exit 1), and the OnStop hooks after it still run: fx runs hooks
// on goroutines of its own, where a panic would end the process unreported.
func TestRunRecoversAPanickingOnStopHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &trace{}
		panics := fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.Hook{OnStop: func(context.Context) error { panic("close telemetry: nil exporter") }})
		})
		a := fxmoduletest.Start(t, baseOptions(tr, panics)...)
		r := a.Stop()
		assert.Equal(t, lifecycle.ExitHookFailed, r.ExitCode)
		assert.Equal(t, drain.Panicked, hookOutcome(r, "TestRunRecoversAPanickingOnStopHook"))
		assert.Contains(t, tr.list(), "client closed while stopped", "an OnStop hook after the one that panicked")
	})
}

// A panicking OnStart hook fails the start (exit 5): what had started is
// drained and stopped, and the report says what panicked.
func TestRunRecoversAPanickingOnStartHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &trace{}
		panics := fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.Hook{OnStart: func(context.Context) error { panic("warm cache: nil map") }})
		})
		logs := &testlog.Buffer{}
		log := fx.Decorate(func() *slog.Logger { return slog.New(slog.NewJSONHandler(logs, nil)) })
		code := fxmodule.Run(baseOptions(tr, panics, signalsFrom(make(chan os.Signal)), log, fx.Provide(fxmodule.AsHook(releaseHook)))...)
		assert.Equal(t, lifecycle.ExitStartFailed, code)
		assert.Equal(t, []string{"released", "client closed while stopped"}, tr.list(), "what had started, drained then stopped")
		assert.Contains(t, loggedReport(t, logs).StartError, "panicked: warm cache: nil map", "the logged report's start_error")
	})
}

// waitFor is an OnStop hook that ignores its context until release closes.
func waitFor(release <-chan struct{}) func(context.Context) error {
	return func(context.Context) error { <-release; return nil }
}

// hookOutcome returns the outcome of the hook in r whose name contains
// part, or "". (A hook is named after the function that appended it, and
// inlining changes where a closure's name begins.)
func hookOutcome(r *lifecycle.Report, part string) drain.Outcome {
	for _, h := range r.Hooks {
		if strings.Contains(h.Name, part) {
			return h.Outcome
		}
	}
	return ""
}

// A start that outlasts fx's StartTimeout is a failed start (exit 5), and
// what had started is still stopped: fx's rollback gets a live context.
// The report says what the hook that timed out said.
func TestRunStartTimeoutRollsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &trace{}
		warm := fx.Invoke(func(lc fx.Lifecycle, m *lifecycle.Manager) {
			lc.Append(fx.Hook{OnStart: fxmodule.Abortable(m, func(ctx context.Context) error {
				<-ctx.Done() // warming a cache that never warms, honouring cancellation
				return errors.New("warm cache: 3 of 40 shards loaded")
			})})
		})
		sig := make(chan os.Signal) // none comes: the timeout alone stops the start
		signals := signalsFrom(sig)
		release := fx.Provide(fxmodule.AsHook(releaseHook))
		logs := &testlog.Buffer{}
		log := fx.Decorate(func() *slog.Logger { return slog.New(slog.NewJSONHandler(logs, nil)) })
		code := fxmodule.Run(baseOptions(tr, warm, signals, release, log, fx.StartTimeout(2*time.Second))...)
		assert.Equal(t, lifecycle.ExitStartFailed, code)
		assert.Equal(t, []string{"released", "client closed while stopped"}, tr.list(),
			"the drain ran (a failed start flushes nothing) and the client was closed")
		startErr := loggedReport(t, logs).StartError
		assert.Contains(t, startErr, "start timed out after 2s", "the logged report's start_error")
		assert.Contains(t, startErr, "warm cache: 3 of 40 shards loaded", "the logged report's start_error")
	})
}

// loggedReport returns the exit code and start error of the drain report in logs.
func loggedReport(t *testing.T, logs *testlog.Buffer) (r struct {
	ExitCode   int    `json:"exit_code"`
	StartError string `json:"start_error"`
}) {
	t.Helper()
	for _, line := range bytes.Split([]byte(logs.String()), []byte("\n")) {
		var rec struct {
			Msg    string          `json:"msg"`
			Report json.RawMessage `json:"report"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "drain report" {
			require.NoError(t, json.Unmarshal(rec.Report, &r))
			return r
		}
	}
	t.Fatalf("no drain report in the logs:\n%s", logs)
	return r
}

// fx's OnStop hooks get fx's StopTimeout, after the drain: what fx
// documents it for, and not what the drain left.
func TestRunGivesOnStopFxsStopTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var budget time.Duration
		measure := fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.Hook{OnStop: func(ctx context.Context) error {
				d, _ := ctx.Deadline()
				budget = time.Until(d)
				return nil
			}})
		})
		a := fxmoduletest.Start(t, append(baseOptions(&trace{}, measure), fx.StopTimeout(time.Minute))...)
		assert.Equal(t, lifecycle.ExitClean, a.Stop().ExitCode)
		assert.Equal(t, time.Minute, budget, "fx.StopTimeout")
	})
}

// A start hook that fails on its own is a failed start (exit 5), even
// though fx's rollback drains from inside the start.
func TestRunStartFailureIsExitStartFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &trace{}
		failing := fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.Hook{OnStart: func(context.Context) error { return errors.New("warm cache: no such table") }})
		})
		sig := make(chan os.Signal)
		signals := signalsFrom(sig)
		logs := &testlog.Buffer{}
		log := fx.Decorate(func() *slog.Logger { return slog.New(slog.NewJSONHandler(logs, nil)) })
		code := fxmodule.Run(baseOptions(tr, failing, signals, log, fx.Provide(fxmodule.AsHook(releaseHook)))...)
		assert.Equal(t, lifecycle.ExitStartFailed, code)
		assert.Equal(t, []string{"released", "client closed while stopped"}, tr.list(), "a failed start flushes nothing")
		// The report, logged from inside fx's rollback, already says so.
		logged := loggedReport(t, logs)
		assert.Equal(t, lifecycle.ExitStartFailed, logged.ExitCode, "the logged report's exit code")
		assert.Contains(t, logged.StartError, "warm cache: no such table")
	})
}

// fxmodule.HTTP wires a whole drained server: a request in flight at the
// signal is answered, the health endpoints answer beside the handler, the
// listener is a gating check, and the drain closes the server.
func TestHTTPServesAndDrains(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	entered, release := make(chan struct{}), make(chan struct{})
	handler := func() http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				close(entered)
				<-release
			}
			_, _ = io.WriteString(w, "hello")
		})
	}
	var reg *readiness.Registry
	app := fxmoduletest.Start(t, baseOptions(&trace{}, fxmodule.HTTP("api", addr, handler), fx.Populate(&reg))...)

	rep := reg.Ready(context.Background())
	require.Equal(t, readiness.StatusOK, rep.Status, "%+v", rep)
	var names []string
	for _, c := range rep.Checks {
		names = append(names, c.Name)
	}
	assert.Contains(t, names, "api_listener")
	resp, err := http.Get("http://" + addr + "/healthz/live")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	slow := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		slow <- string(b)
	}()
	<-entered
	app.Signal()
	close(release)
	assert.Equal(t, "hello", <-slow, "the request in flight at the signal is answered")
	r := app.Wait()
	assert.Equal(t, lifecycle.ExitClean, r.ExitCode)
	for _, h := range []string{"api.stop_intake", "api.wait_in_flight", "api.serve"} {
		got, ok := r.Hook(h)
		assert.True(t, ok, h)
		assert.Equal(t, drain.OK, got.Outcome, h)
	}
	_, err = net.Dial("tcp", addr)
	assert.Error(t, err, "the drain closed the listener")
}

// An address that cannot be bound fails the start and names it.
func TestHTTPBadAddressFailsStart(t *testing.T) {
	handler := func() http.Handler { return http.NotFoundHandler() }
	sig := make(chan os.Signal)
	signals := signalsFrom(sig)
	code := fxmodule.Run(baseOptions(&trace{}, signals, fxmodule.HTTP("api", "256.0.0.1:80", handler))...)
	assert.Equal(t, lifecycle.ExitStartFailed, code)
}

// A start that fails in a hook appended before Module's own (here a
// dependency of a drain hook) is drained before fx's rollback closes what
// the drain hooks use.
func TestRunDrainsBeforeRollbackClosesClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &trace{}
		type warmer struct{}
		failing := fx.Provide(func(lc fx.Lifecycle, c *client) *warmer {
			lc.Append(fx.Hook{OnStart: func(context.Context) error { return errors.New("warm: no such table") }})
			return &warmer{}
		})
		needsWarmer := fx.Provide(fxmodule.AsHook(func(*warmer) drain.Hook {
			return drain.Hook{Name: "warmed", Phase: drain.Close, Run: func(context.Context) error { return nil }}
		}))
		sig := make(chan os.Signal)
		signals := signalsFrom(sig)
		release := fx.Provide(fxmodule.AsHook(releaseHook))
		code := fxmodule.Run(baseOptions(tr, failing, needsWarmer, signals, release)...)
		assert.Equal(t, lifecycle.ExitStartFailed, code)
		assert.Equal(t, []string{"released", "client closed while stopped"}, tr.list(),
			"the drain used the client before the rollback closed it (a failed start flushes nothing)")
	})
}

// An app's own fx.WithLogger changes nothing of the drain: the same
// report, exit code and order, after a stop (an OnStop hook failing) and
// after a failed start (the rollback after the drain). Run reads no event.
func TestRunDrainsTheSameWithALoggerOfTheApp(t *testing.T) {
	ownLogger := fx.WithLogger(func() fxevent.Logger { return fxevent.NopLogger })
	var onStopErr error // one closure for both runs: the report names it
	failingOnStop := fx.Invoke(func(lc fx.Lifecycle) { lc.Append(fx.Hook{OnStop: flushTelemetry(&onStopErr)}) })
	type outcome struct {
		Code  int
		Trace []string
		Hooks []string // name, phase, outcome
	}
	stop := func(extra ...fx.Option) outcome {
		var o outcome
		synctest.Test(t, func(t *testing.T) {
			tr := &trace{}
			r := fxmoduletest.Start(t, baseOptions(tr, append(extra, failingOnStop)...)...).Stop()
			o = outcome{Code: r.ExitCode, Trace: tr.list()}
			for _, h := range r.Hooks {
				o.Hooks = append(o.Hooks, fmt.Sprintf("%s %s %s", h.Name, h.Phase, h.Outcome))
			}
		})
		return o
	}
	failedStart := func(extra ...fx.Option) outcome {
		var o outcome
		synctest.Test(t, func(t *testing.T) {
			tr := &trace{}
			failing := fx.Invoke(func(lc fx.Lifecycle, c *client) {
				lc.Append(fx.Hook{OnStart: func(context.Context) error { return errors.New("warm: no such table") }})
			})
			sig := make(chan os.Signal)
			signals := signalsFrom(sig)
			code := fxmodule.Run(baseOptions(tr, append(extra, failing, signals, fx.Provide(fxmodule.AsHook(releaseHook)))...)...)
			o = outcome{Code: code, Trace: tr.list()}
		})
		return o
	}

	plain, own := stop(), stop(ownLogger)
	assert.Equal(t, lifecycle.ExitHookFailed, plain.Code, "the failing OnStop hook counts")
	assert.Contains(t, plain.Hooks, "fx.OnStop github.com/drainkit/drainkit/fxmodule_test.newClient close ok")
	assert.Equal(t, plain, own, "a stop")

	plain, own = failedStart(), failedStart(ownLogger)
	assert.Equal(t, outcome{Code: lifecycle.ExitStartFailed, Trace: []string{"released", "client closed while stopped"}}, plain)
	assert.Equal(t, plain, own, "a failed start")
}

// fx.Shutdowner stops an app run by Run like a first signal. Given
// fx.ExitCode, which Run cannot read, it still stops the app, and says in
// its error that the exit code is the drain's.
func TestRunHonoursShutdowner(t *testing.T) {
	for _, tt := range []struct {
		name    string
		opts    []fx.ShutdownOption
		wantErr error
	}{
		{name: "no options"},
		{name: "fx.ExitCode", opts: []fx.ShutdownOption{fx.ExitCode(3)}, wantErr: fxmodule.ErrShutdownOptionsForTest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &trace{}
				var sd fx.Shutdowner
				a := fxmoduletest.Start(t, baseOptions(tr, fx.Populate(&sd))...)
				assert.Equal(t, tt.wantErr, sd.Shutdown(tt.opts...))
				r := a.Wait()
				assert.Equal(t, lifecycle.ExitClean, r.ExitCode, "the drain's")
				assert.Contains(t, r.Reason, "fx.Shutdowner")
				assert.Equal(t, []string{"flushed", "client closed while stopped"}, tr.list())
			})
		})
	}
}

// The manager logs to lifecycle.Config.Logger when it is set, and to the
// graph's *slog.Logger otherwise.
func TestManagerLoggerFromConfigOrGraph(t *testing.T) {
	tests := []struct {
		name       string
		inConfig   bool
		wantGraph  bool
		wantConfig bool
	}{
		{name: "config has none: the graph's", inConfig: false, wantGraph: true},
		{name: "config has one: the config's", inConfig: true, wantConfig: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			graph, own := &testlog.Buffer{}, &testlog.Buffer{}
			cfg := lifecycle.Config{Service: "svc", NodeID: "n1"}
			if tt.inConfig {
				cfg.Logger = slog.New(slog.NewTextHandler(own, nil))
			}
			var m *lifecycle.Manager
			app := fxtest.New(t, fxmodule.Module, fx.Supply(cfg, slog.New(slog.NewTextHandler(graph, nil))), fx.Populate(&m))
			defer app.RequireStop()
			m.Shutdown(context.Background(), "test") // a drain logs its transitions
			if got := strings.Contains(graph.String(), "state transition"); got != tt.wantGraph {
				t.Errorf("graph logger has the transitions: got %v; want %v", got, tt.wantGraph)
			}
			if got := strings.Contains(own.String(), "state transition"); got != tt.wantConfig {
				t.Errorf("config logger has the transitions: got %v; want %v", got, tt.wantConfig)
			}
		})
	}
}

// signalsFrom gives the app's manager sig for its signals, as fxmoduletest
// does: a test must not signal its own process.
func signalsFrom(sig <-chan os.Signal) fx.Option {
	return fx.Supply(fx.Annotated{Name: "drainkit.signals", Target: sig})
}

// namedHooks is a slice type of the app's own, as a constructor may return.
type namedHooks []drain.Hook

// A constructor returning a named slice of hooks joins the drain as one
// returning []drain.Hook does: none of its hooks is dropped.
func TestAsHookTakesANamedSliceOfHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := func(context.Context) error { return nil }
		hooks := fx.Provide(fxmodule.AsHook(func() namedHooks {
			return namedHooks{{Name: "a", Phase: drain.Flush, Run: ok}, {Name: "b", Phase: drain.Release, Run: ok}}
		}))
		r := fxmoduletest.Start(t, baseOptions(&trace{}, hooks)...).Stop()
		for _, name := range []string{"a", "b"} {
			_, ran := r.Hook(name)
			assert.True(t, ran, "hook %q in the report", name)
		}
	})
}

// A stop request during the start, then an OnStart hook that fails for a
// reason of its own, after a hook with an OnStop: fx's rollback drains as
// the stop's, whose report leaves the failure out (docs/fxmodule.md: a
// known limitation), so a line says what failed.
func TestOwnStartFailureAfterASignalIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &trace{}
		sig := make(chan os.Signal, 3)
		inStart, fail := make(chan struct{}), make(chan struct{})
		failing := fx.Invoke(func(lc fx.Lifecycle, _ *client) { // after the client's OnStop: fx rolls back
			lc.Append(fx.Hook{OnStart: func(context.Context) error {
				close(inStart)
				<-fail
				return errors.New("listen tcp :8080: bind: address already in use")
			}})
		})
		logs := &testlog.Buffer{}
		log := fx.Decorate(func() *slog.Logger { return slog.New(slog.NewJSONHandler(logs, nil)) })
		code := make(chan int, 1)
		go func() {
			code <- fxmodule.Run(baseOptions(tr, failing, signalsFrom(sig), log, fx.Provide(fxmodule.AsHook(releaseHook)))...)
		}()
		<-inStart
		sig <- syscall.SIGTERM
		synctest.Wait() // the stop request is in
		close(fail)
		<-code
		assert.Contains(t, logs.String(), `"msg":"fxmodule: an OnStart hook failed while a stop was requested; the drain reported the stop, not this failure","service":"svc","node_id":"n1","error":"listen tcp :8080: bind: address already in use"`)
	})
}
