package lease

import (
	"errors"
	"fmt"
)

// Sentinel errors. How a lease ended is context.Cause(l.Context()).
var (
	// ErrDraining is returned by Acquire after the flip, and by Release
	// for a lease the hand-off took.
	ErrDraining = errors.New("lease: draining")
	// ErrHeld is matched by Acquire's error naming another holder.
	ErrHeld = errors.New("lease: held by another holder")
	// ErrNotHeld: expired or taken in Redis. It should not fail a drain.
	ErrNotHeld = errors.New("lease: not held")
	// ErrNotRunning is returned by Acquire before Start or after Stop.
	ErrNotRunning = errors.New("lease: manager not running")
	// ErrUnsafeServer is returned by Start for a server too old for the
	// scripts, or that may evict lease keys.
	ErrUnsafeServer = errors.New("lease: server cannot keep leases safely")
	// ErrLost is the cause of a lost lease: gone, taken, or overdue.
	ErrLost = errors.New("lease: lost")
	// ErrReleased is the cause of a released lease.
	ErrReleased = errors.New("lease: released")
	// ErrLeftToExpire is the cause of a lease left to expire unreleased.
	ErrLeftToExpire = errors.New("lease: left to expire")
)

// heldError names the holder of a room and matches ErrHeld. Node is empty
// for a route value that cannot be parsed.
type heldError struct {
	ID    string
	Node  string
	Fence int64
}

func (e *heldError) Error() string {
	if e.Node == "" {
		return fmt.Sprintf("lease: room %q held by an unrecognised value", e.ID)
	}
	return fmt.Sprintf("lease: room %q held by node %q (fence %d)", e.ID, e.Node, e.Fence)
}

func (e *heldError) Is(target error) bool { return target == ErrHeld }

// lostError wraps ErrLost with the reason.
func lostError(reason string) error { return fmt.Errorf("%w: %s", ErrLost, reason) }
