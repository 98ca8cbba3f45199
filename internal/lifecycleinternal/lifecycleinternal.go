// Package lifecycleinternal reaches what package lifecycle keeps
// unexported but package fxmodule and the tests of this repository need:
// the signal channel a test drives instead of the process's own signals,
// the work fxmodule runs after the drain, and the configuration in force.
// Package lifecycle sets the functions when it is initialised, so they are
// set in any program that links it. Each takes the manager as m, a
// *lifecycle.Manager (this package cannot import lifecycle, which imports
// it), and must be called before the manager's Run.
package lifecycleinternal

import (
	"os"

	"github.com/drainkit/drainkit/drain"
)

var (
	// SetSignals makes m's Run read ch instead of subscribing to the
	// process's SIGTERM and SIGINT: the first value drains, the second
	// forces, the third exits.
	SetSignals func(m any, ch <-chan os.Signal)

	// SetAfterDrain makes m run fn once its drain has finished and the
	// state is Stopped, also when the drain was forced or ran out of time,
	// and before the report is made: fn's results join the report (and
	// decide the exit code) like the drain's own hooks. fn bounds its own
	// work. Package fxmodule runs fx's OnStop hooks there.
	SetAfterDrain func(m any, fn func() []drain.HookResult)

	// Config returns the lifecycle.Config m runs with, defaults applied.
	Config func(m any) any
)
