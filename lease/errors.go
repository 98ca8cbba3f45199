package lease

import (
	"errors"
	"fmt"
)

// Sentinel errors. Causes of a lease's end are available through
// context.Cause(l.Context()).
var (
	// ErrDraining is returned by Acquire once the process drains: from
	// the moment [Config].Draining reports true, or the drain's lease hooks
	// began. [Lease.Release] returns it for a lease the drain's hand-off
	// took and did not leave to expire: the hand-off decides.
	ErrDraining = errors.New("lease: draining")
	// ErrHeld is matched (errors.Is) by Acquire's error when someone else
	// holds the room; the error's text names the holder's node and fence,
	// and [Manager.Owner] returns the holder's address.
	ErrHeld = errors.New("lease: held by another holder")
	// ErrNotHeld reports that a lease (or a room's route) is not ours in
	// Redis: it expired or was taken. Release returns it for information;
	// it should not fail a drain.
	ErrNotHeld = errors.New("lease: not held")
	// ErrNotRunning is returned by Acquire before Start or after Stop: no
	// renewer would keep the lease alive.
	ErrNotRunning = errors.New("lease: manager not running")
	// ErrUnsafeServer is returned by Start for a Redis server that cannot
	// keep leases: older than the scripts need, or with a maxmemory-policy
	// that may evict lease keys (see [Config].AcceptEviction).
	ErrUnsafeServer = errors.New("lease: server cannot keep leases safely")
	// ErrLost is the cause of a lease's context when the lease was lost:
	// Redis reported it gone or stolen, or renewal stayed overdue.
	ErrLost = errors.New("lease: lost")
	// ErrReleased is the cause of a lease's context after Release.
	ErrReleased = errors.New("lease: released")
	// ErrLeftToExpire is the cause of a lease's context when the drain left
	// it to expire (its hand-off failed, or the manager stopped holding it).
	ErrLeftToExpire = errors.New("lease: left to expire")
)

// heldError reports the current holder of a room that Acquire could not
// take. errors.Is(err, ErrHeld) is true. It is not exported: a caller who
// needs the holder asks [Manager.Owner], which also has its address.
type heldError struct {
	// ID is the room id.
	ID string
	// Node is the holder's node id; empty if the route value could not be
	// parsed (it is then treated as held and never overwritten).
	Node string
	// Fence is the holder's fencing token; 0 if unparseable.
	Fence int64
}

func (e *heldError) Error() string {
	if e.Node == "" {
		return fmt.Sprintf("lease: room %q held by an unrecognised value", e.ID)
	}
	return fmt.Sprintf("lease: room %q held by node %q (fence %d)", e.ID, e.Node, e.Fence)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *heldError) Is(target error) bool { return target == ErrHeld }

// lostError is a lease's cause when lost; it wraps ErrLost with the reason.
func lostError(reason string) error { return fmt.Errorf("%w: %s", ErrLost, reason) }
