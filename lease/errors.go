package lease

import (
	"errors"
	"fmt"
)

// Sentinel errors. How a lease ended is context.Cause(l.Context()).
var (
	// ErrDraining: Acquire after the flip of a room nobody holds (or one
	// the hand-off has), or Release of a lease the hand-off took.
	ErrDraining = errors.New("lease: draining")
	// ErrInvalidID is matched by the error of Acquire and Owner for a room
	// id no route key can carry (empty, over MaxIDLen bytes, '{', '}' or
	// whitespace): the caller's input, for a 400, not a failure of Redis.
	ErrInvalidID = errors.New("lease: invalid room id")
	// ErrHeld is matched by Acquire's error naming another holder.
	ErrHeld = errors.New("lease: held by another holder")
	// ErrNotHeld: Release found the room taken or its session ended; Owner
	// found it nobody's. It should not fail a drain.
	ErrNotHeld = errors.New("lease: not held")
	// ErrNotRunning is returned by Acquire before Start or after Stop
	// (ErrDraining instead once BeginDrain was called).
	ErrNotRunning = errors.New("lease: manager not running")
	// ErrUnsafeServer: Start found a server too old or that may evict lease keys.
	ErrUnsafeServer = errors.New("lease: server cannot keep leases safely")
	// ErrLost is the cause of a lease lost with its session: the session
	// ended in Redis, or no renewal was confirmed for TTL·2/3.
	ErrLost = errors.New("lease: lost")
	// ErrReleased is the cause of a released lease.
	ErrReleased = errors.New("lease: released")
	// ErrLeftToExpire is the cause of a lease that ended unflushed once HandOff
	// was called: not released one by one, its room moves with the session's end.
	ErrLeftToExpire = errors.New("lease: left to expire")
)

// Errors told apart inside the package; none is returned to a caller alone.
var (
	errSessionBusy = errors.New("another process's session of this node id is alive") // Start waits it out
	errSessionLost = errors.New("lease: the session was lost")                        // tick's, starting a new one
	errShortWait   = errors.New("replicas did not acknowledge in time")               // fewer than Config.WaitReplicas
	errNobodyWaits = errors.New("every caller gave up")                               // ends an acquisition
	errGateClosed  = fmt.Errorf("%w: this node takes no new room", ErrDraining)       // Acquire looks the holder up
)

// heldBy returns an error matching ErrHeld that names the room's holder,
// or says its route value cannot be parsed (node "").
func heldBy(id, node string, fence int64) error {
	if node == "" {
		return fmt.Errorf("%w: room %q by an unrecognised value", ErrHeld, id)
	}
	return fmt.Errorf("%w: room %q by node %q (fence %d)", ErrHeld, id, node, fence)
}

// lostError wraps ErrLost with the reason.
func lostError(reason string) error { return fmt.Errorf("%w: %s", ErrLost, reason) }
