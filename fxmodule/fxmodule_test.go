package fxmodule_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
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

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func baseOptions(tr *trace, extra ...fx.Option) []fx.Option {
	return append([]fx.Option{
		fxmodule.Module,
		fx.Supply(lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 10 * time.Second}.NoDelay()),
		fx.Supply(quiet(), tr),
		fx.NopLogger,
		fx.Provide(newClient),
		fx.Provide(fxmodule.AsHook(newFlushHook)),
		fx.Provide(fxmodule.AsCheck(func() readiness.Check {
			return readiness.Check{Name: "db", Tier: readiness.Gating, Probe: func(context.Context) error { return nil }}
		})),
	}, extra...)
}

func TestGroupsAndOrderUnderFxtest(t *testing.T) {
	tr := &trace{}
	var (
		m   *lifecycle.Manager
		reg *readiness.Registry
	)
	app := fxtest.New(t, baseOptions(tr, fx.Populate(&m, &reg))...)
	app.RequireStart()
	assert.Equal(t, lifecycle.Running, m.State())
	rep := reg.Ready(context.Background())
	require.Len(t, rep.Checks, 1, "the contributed check is registered")
	assert.Equal(t, "db", rep.Checks[0].Name)
	assert.Equal(t, readiness.StatusOK, rep.Status)

	app.RequireStop()
	assert.Equal(t, []string{"flushed", "client closed while stopped"}, tr.list(),
		"the drain uses the client before fx closes it")
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
			fx.Provide(fxmodule.AsOption(func() lifecycle.Option { return lifecycle.WithSignals(sig) })))...)
	}()
	<-isRunning
	sig <- syscall.SIGTERM
	assert.Equal(t, lifecycle.ExitClean, <-code)
	assert.Equal(t, []string{"flushed", "late server stopped while stopped", "client closed while stopped"}, tr.list())
}

func TestRunRefusesStopTimeoutShorterThanDrain(t *testing.T) {
	tr := &trace{}
	code := fxmodule.Run(baseOptions(tr, fx.StopTimeout(5*time.Second))...)
	assert.Equal(t, lifecycle.ExitConfig, code)
	err := &fxmodule.TimeoutError{Stop: "5s", Drain: "10s"}
	assert.Contains(t, err.Error(), "fx StopTimeout 5s is shorter than DRAIN_TIMEOUT 10s")
}

func TestRunBadConfigIsExitConfig(t *testing.T) {
	code := fxmodule.Run(fxmodule.Module, fx.NopLogger,
		fx.Supply(lifecycle.Config{DrainTimeout: time.Second, DrainDelay: 2 * time.Second}))
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
			fx.Provide(fxmodule.AsOption(func() lifecycle.Option { return lifecycle.WithSignals(sig) })))...)
	}()
	<-starting
	sig <- syscall.SIGTERM
	assert.Equal(t, lifecycle.ExitClean, <-code, "an aborted start that stopped cleanly")
	assert.Equal(t, []string{"slow start cancelled", "flushed", "client closed while stopped"}, tr.list(),
		"what had started is drained and stopped")
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
			fx.Provide(fxmodule.AsOption(func() lifecycle.Option { return lifecycle.WithSignals(sig) })))...)
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
	app := fxtest.New(t,
		fxmodule.Module, fx.NopLogger,
		fx.Supply(lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 30 * time.Second}.NoDelay(), quiet()),
		fx.Provide(fxmodule.AsCheck(func() readiness.Check {
			return readiness.Check{Name: "hung", Tier: readiness.Informational, Timeout: 100 * time.Millisecond,
				Probe: func(context.Context) error { <-release; return nil }}
		})),
		fx.Populate(&reg),
	)
	app.RequireStart()
	reg.Ready(context.Background()) // starts the hung check
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := app.Stop(ctx)
	require.Error(t, err, "the report says readiness.close did not finish")
	assert.Contains(t, err.Error(), "readiness.close")
	assert.NoError(t, ctx.Err(), "the drain ended long before its 30s deadline")
}

// fx's OnStop hooks after the drain get only what is left of DRAIN_TIMEOUT,
// not a fresh StopTimeout: the process exits by the drain's deadline.
func TestRunStopBoundedByDrainDeadline(t *testing.T) {
	tr := &trace{}
	sig := make(chan os.Signal, 3)
	running, isRunning := onRunning()
	got := make(chan bool, 1)
	slowStop := fx.Invoke(func(lc fx.Lifecycle, mm *lifecycle.Manager) {
		lc.Append(fx.Hook{OnStop: func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			want, _ := mm.Deadline()
			got <- ok && !d.After(want)
			return nil
		}})
	})
	code := make(chan int, 1)
	go func() {
		code <- fxmodule.Run(baseOptions(tr, slowStop, running, fx.StopTimeout(time.Minute),
			fx.Provide(fxmodule.AsOption(func() lifecycle.Option { return lifecycle.WithSignals(sig) })))...)
	}()
	<-isRunning
	sig <- syscall.SIGTERM
	assert.Equal(t, lifecycle.ExitClean, <-code)
	assert.True(t, <-got, "OnStop's deadline must not pass the drain's")
}
