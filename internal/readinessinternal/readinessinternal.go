// Package readinessinternal reaches what package readiness keeps
// unexported but its adapters in this repository need. Package readiness
// sets the functions when it is initialised, so they are set in any
// program that links it.
package readinessinternal

// Config returns the readiness.Config that r, a *readiness.Registry, runs
// with, defaults applied: the service name the grpc.health.v1 server
// serves under and the CacheTTL it paces its polling by. (This package
// cannot import readiness, which imports it; the caller asserts the type.)
var Config func(r any) any
