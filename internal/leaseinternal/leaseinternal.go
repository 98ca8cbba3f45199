// Package leaseinternal reaches what package lease keeps unexported but the
// benchmarks of the bench module drive directly: one renewal round, the
// work of one renewer tick, measured without the ticker around it. Package
// lease sets the functions when it is initialised, so they are set in any
// program that links it.
package leaseinternal

import "context"

// RenewAll runs one renewal round of m, a *lease.Manager: every held
// lease and the node heartbeat in one pipeline.
var RenewAll func(m any, ctx context.Context) error
