package fxmoduletest_test

import (
	"context"
	"log/slog"
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
		fxmodule.StopTimeoutFor(cfg),
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
