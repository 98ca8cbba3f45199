// Package keyed runs one worker per key for as long as the key has users.
//
// # Use
//
// The first [Workers.Join] of a key makes its value and starts its worker;
// later Joins of the key share that value; the last [Workers.Leave] stops
// the worker; [Workers.Close] stops every worker and waits for them.
// [Workers.Forget] retires a value (a worker that failed for good) so that
// the next Join starts afresh.
//
// The example services share the reading of a room among all its
// watchers this way: room-service's per-room pollers, the gateway's
// per-room upstream watches.
package keyed
