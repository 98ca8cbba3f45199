package fxmoduletest_test

import (
	"context"
	"testing"

	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/lifecycle"
)

// newFlushHook is the service's drain work under test.
func newFlushHook() drain.Hook {
	return drain.Hook{Name: "store.flush", Phase: drain.Flush, Run: func(context.Context) error { return nil }}
}

// testFlush is a service's test of its drain: in the service's own
// _test.go file it is func TestFlush(t *testing.T).
func testFlush(t *testing.T) {
	cfg := lifecycle.Config{Service: "room-service"}
	app := fxmoduletest.Start(t, fxmodule.Module, fx.Supply(cfg), fx.Provide(fxmodule.AsHook(newFlushHook)))
	// … exercise the running app …
	r := app.Stop()                  // SIGTERM, then the drain
	hook, _ := r.Hook("store.flush") // by the hook's Name, not its phase
	if hook.Outcome != drain.OK {
		t.Errorf("store.flush: got %s; want %s", hook.Outcome, drain.OK)
	}
}

// A test starts the app as fxmodule.Run runs it in production, stops it
// with SIGTERM and reads the drain's report (testFlush above; the
// package's tests run it).
func Example() {}
