// Package draininternal reaches what package drain keeps unexported but
// other packages of this module use: package lifecycle validates hooks
// when they are added, logs each phase as it begins and ends its adaptive
// delay on the last arrival; package grpcdrain ends untracked streams when
// intake closes. Package drain sets the function variables when it is
// initialised, so they are set in any program that links it. The values
// are typed any because drain imports this package, not the reverse.
package draininternal

import (
	"context"
	"time"
)

var (
	// ValidateHook reports the first problem that would make h, a
	// drain.Hook, fail in drain.Run.
	ValidateHook func(h any) error
	// LastArrival returns when t, a *drain.Tracker, last counted an
	// arrival (to the millisecond, rounded down), or the zero time if never.
	LastArrival func(t any) time.Time
	// IntakeClosed returns a channel closed once intake of t, a
	// *drain.Tracker, is closed.
	IntakeClosed func(t any) <-chan struct{}
)

type onPhaseKey struct{}

// WithOnPhase returns a copy of ctx that makes drain.Run call fn as each
// phase that has hooks begins, with the phase and the number of its hooks.
func WithOnPhase(ctx context.Context, fn func(phase string, hooks int)) context.Context {
	return context.WithValue(ctx, onPhaseKey{}, fn)
}

// OnPhase returns the function WithOnPhase put in ctx, or nil.
func OnPhase(ctx context.Context) func(phase string, hooks int) {
	fn, _ := ctx.Value(onPhaseKey{}).(func(string, int))
	return fn
}
