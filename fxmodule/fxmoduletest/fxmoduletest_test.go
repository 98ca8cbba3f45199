package fxmoduletest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func options(extra ...fx.Option) []fx.Option {
	cfg := lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 10 * time.Second, DrainDelay: 5 * time.Second}
	return append([]fx.Option{
		fxmodule.Module,
		fx.Supply(cfg, slog.New(slog.DiscardHandler)),
		fx.StopTimeout(5 * time.Second),
	}, extra...)
}

// The report says which hooks ran, in which phase, with which outcome; on
// synctest's clock the 5 s propagation delay costs no real time.
func TestStopReportsTheDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hooks := fx.Provide(
			fxmodule.AsHook(func() drain.Hook {
				return drain.Hook{Name: "flush", Phase: drain.Flush, Run: func(context.Context) error { return nil }}
			}),
			fxmodule.AsHook(func() drain.Hook {
				return drain.Hook{Name: "stuck", Phase: drain.Release, Timeout: time.Second,
					Run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
			}),
		)
		app := fxmoduletest.Start(t, options(hooks)...)
		assert.Equal(t, lifecycle.Running, app.Manager().State())
		began := time.Now()
		r := app.Stop()
		assert.Equal(t, 6*time.Second, time.Since(began), "the delay, then the stuck hook's own timeout")
		assert.Equal(t, lifecycle.ExitHookFailed, r.ExitCode)
		flush, ok := r.Hook("flush")
		require.True(t, ok)
		assert.Equal(t, drain.OK, flush.Outcome)
		stuck, _ := r.Hook("stuck")
		assert.Equal(t, drain.TimedOut, stuck.Outcome)
		assert.Equal(t, drain.Release, stuck.Phase)
	})
}

// An app the test did not stop is stopped at cleanup: nothing outlives the
// test (goleak checks).
func TestCleanupStops(t *testing.T) {
	var m *lifecycle.Manager
	synctest.Test(t, func(t *testing.T) { // its t's cleanups run before it returns
		m = fxmoduletest.Start(t, options()...).Manager()
	})
	assert.Equal(t, lifecycle.Stopped, m.State())
}

// An app that decorates lifecycle.Config itself (fx allows one decoration
// of a type at the root) runs under Start, and its signals still drain it:
// Start gives them in a value of its own, not by decorating the config.
func TestStartWithAnAppThatDecoratesItsConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shorter := fx.Decorate(func(c lifecycle.Config) lifecycle.Config { c.DrainDelay = time.Second; return c })
		app := fxmoduletest.Start(t, options(shorter)...)
		began := time.Now()
		r := app.Stop()
		assert.Equal(t, time.Second, time.Since(began), "the app's own, decorated delay")
		assert.Equal(t, lifecycle.ExitClean, r.ExitCode)
	})
}

// fatalTB records what Start fails the test with, so the test can read it.
type fatalTB struct {
	testing.TB
	failure string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.failure = fmt.Sprintf(format, args...)
	runtime.Goexit() // as FailNow does: Start does not return
}

// A listener inside a synctest bubble stops the bubble's clock (a goroutine
// waiting on the network is never durably blocked), so the drain's first
// timer would wait until the test binary's timeout. Start says so at once
// instead, names the goroutine, and stops the app.
func TestAppThatListensFailsAtOnceOnTheFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		handler := func() http.Handler { return http.NotFoundHandler() }
		tb := &fatalTB{TB: t}
		started := make(chan *fxmoduletest.App, 1)
		go func() {
			defer close(started)
			started <- fxmoduletest.Start(tb, options(fxmodule.HTTP("api", "127.0.0.1:0", handler))...)
		}()
		if app := <-started; app != nil { // not failed: force it, or its drain hangs this test
			app.Signal()
			app.Signal()
			app.Wait()
		}
		assert.Contains(t, tb.failure, "cannot run on testing/synctest's fake clock")
		assert.Contains(t, tb.failure, "(net/http.(*Server).Serve, started by github.com/drainkit/drainkit/internal/serve.")
		assert.Contains(t, tb.failure, "call Start outside synctest.Test")
	})
}

// Outside a bubble the same app runs on the real clock: the check is for
// the fake clock only.
func TestAppThatListensRunsOnTheRealClock(t *testing.T) {
	handler := func() http.Handler { return http.NotFoundHandler() }
	cfg := lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 10 * time.Second}
	app := fxmoduletest.Start(t, fxmodule.Module, fx.Supply(cfg, slog.New(slog.DiscardHandler)),
		fx.StopTimeout(5*time.Second), fxmodule.HTTP("api", "127.0.0.1:0", handler))
	assert.Equal(t, lifecycle.ExitClean, app.Stop().ExitCode)
}

// The package doc's usage (the example's testFlush) runs as written: no
// fx.StopTimeout, DrainTimeout at its default.
func TestPackageDocUsageRunsAsWritten(t *testing.T) { testFlush(t) }
