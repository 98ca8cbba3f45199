package fxmodule_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/internal/testlog"
	"github.com/drainkit/drainkit/lifecycle"
)

// A SIGTERM during the start aborts an Abortable hook and fx rolls the
// start back: the rollback's OnStop hooks get fx's StopTimeout from the
// drain's end, as after a stop, so the process exits within DRAIN_TIMEOUT +
// StopTimeout of the signal (the exit_within Run logs). They were given
// what was left of the start's budget, StartTimeout + DRAIN_TIMEOUT +
// StopTimeout from the start.
func TestARollbackGetsStopTimeoutFromItsDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sig := make(chan os.Signal, 3)
		budgets := make(chan time.Duration, 1)
		exporter := fx.Invoke(func(lc fx.Lifecycle) { // its Close waits for a peer that never answers
			lc.Append(fx.Hook{OnStop: func(ctx context.Context) error {
				d, _ := ctx.Deadline()
				budgets <- time.Until(d)
				<-ctx.Done()
				return ctx.Err()
			}})
		})
		starting := make(chan struct{})
		warm := fx.Invoke(func(lc fx.Lifecycle, m *lifecycle.Manager) {
			lc.Append(fx.Hook{OnStart: fxmodule.Abortable(m, func(ctx context.Context) error {
				close(starting)
				<-ctx.Done()
				return ctx.Err()
			})})
		})
		code := make(chan int, 1)
		go func() { // DRAIN_TIMEOUT 10 s and fx.StopTimeout 5 s (baseOptions); fx's StartTimeout 15 s
			code <- fxmodule.Run(baseOptions(&trace{}, exporter, warm, signalsFrom(sig))...)
		}()
		<-starting
		signalled := time.Now()
		sig <- syscall.SIGTERM
		<-code
		assert.LessOrEqual(t, time.Since(signalled), 10*time.Second+5*time.Second, "exit after the signal; want within DRAIN_TIMEOUT + StopTimeout")
		assert.Equal(t, 5*time.Second, <-budgets, "the rollback's OnStop hook's budget; want fx's StopTimeout")
	})
}

// signalAtRollback is an fx event logger that sends a SIGTERM as fx begins
// to roll a failed start back, after the OnStart hook failed and before the
// first OnStop hook of the rollback: an orchestrator's SIGTERM landing there.
type signalAtRollback struct{ sig chan<- os.Signal }

func (l signalAtRollback) LogEvent(e fxevent.Event) {
	if _, ok := e.(*fxevent.RollingBack); ok {
		l.sig <- syscall.SIGTERM
		synctest.Wait() // the manager has taken the stop request
	}
}

// An OnStart hook that fails on its own, then a signal before fx's rollback
// drains: the drain is the signal's (exit 0, docs/fxmodule.md's known
// limitation), and a line still says what failed. Before, only the other
// order (the signal, then the failure) was logged, and this failure was in
// no line at all.
func TestAStartFailureBeforeASignalIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sig := make(chan os.Signal, 3)
		failing := fx.Invoke(func(lc fx.Lifecycle, _ *client) { // after the client's OnStop: fx rolls back
			lc.Append(fx.Hook{OnStart: func(context.Context) error {
				return errors.New("listen tcp :8080: bind: address already in use")
			}})
		})
		logs := &testlog.Buffer{}
		log := fx.Decorate(func() *slog.Logger { return slog.New(slog.NewJSONHandler(logs, nil)) })
		events := fx.WithLogger(func() fxevent.Logger { return signalAtRollback{sig: sig} })
		fxmodule.Run(baseOptions(&trace{}, failing, signalsFrom(sig), log, events, fx.Provide(fxmodule.AsHook(releaseHook)))...)
		assert.Contains(t, logs.String(), `"msg":"fxmodule: an OnStart hook failed while a stop was requested; the drain reported the stop, not this failure","service":"svc","node_id":"n1","error":"listen tcp :8080: bind: address already in use"`)
	})
}

// fx takes fx.StopTimeout of the longest duration for "no limit": Run's
// start budget, StartTimeout + DRAIN_TIMEOUT + StopTimeout, wrapped to a
// negative duration, and the app never started (exit 5).
func TestTheLongestStopTimeoutStillStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sig := make(chan os.Signal, 3)
		running, isRunning := onRunning()
		code := make(chan int, 1)
		go func() {
			code <- fxmodule.Run(append(baseOptions(&trace{}, running, signalsFrom(sig)), fx.StopTimeout(time.Duration(math.MaxInt64)))...)
		}()
		select {
		case <-isRunning:
			sig <- syscall.SIGTERM
			assert.Equal(t, lifecycle.ExitClean, <-code)
		case c := <-code:
			t.Fatalf("Run exited %d before the app was running", c)
		}
	})
}
