// Package leaseinternal reaches what package lease keeps unexported but
// other packages of this module use: fxmodule/fxlease closes a Manager's gate
// from the lifecycle listener that runs at the flip, and the benchmarks of
// the bench module drive one renewal round (the work of one renewer tick,
// measured without the ticker around it) and count the leases held.
// Package lease sets the functions when it is initialised, so they are set
// in any program that links it. The values are typed any because lease
// imports this package, not the reverse.
package leaseinternal

import "context"

var (
	// RenewAll runs one renewal round of m, a *lease.Manager: every held
	// lease and the node heartbeat in one pipeline.
	RenewAll func(m any, ctx context.Context) error
	// BeginDrain closes the acquisition gate of m, a *lease.Manager, and
	// has its renewer mark the heartbeat draining at once. It does no I/O
	// and never blocks.
	BeginDrain func(m any)
	// Held returns how many leases m, a *lease.Manager, holds.
	Held func(m any) int
)
