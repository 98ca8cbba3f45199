package room

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultSnapshotInterval is how often [Service.Run] snapshots the rooms
// that changed since their last snapshot.
const DefaultSnapshotInterval = 5 * time.Second

// DefaultSnapshotWriteTimeout bounds one room's periodic snapshot write,
// and so how long a command for that room can wait behind it.
const DefaultSnapshotWriteTimeout = time.Second

// Lease is this node's hold on one room, as handed out by [Leases]. A thin
// adapter over the lease package's *lease.Lease satisfies it.
type Lease interface {
	// ID is the room id the lease is for.
	ID() string
	// Token is the fencing token, the last field of room:route:{ID}.
	Token() int64
	// Context is cancelled when the lease ends: lost (not renewed in time,
	// or stolen), left to expire, or released.
	Context() context.Context
}

// Leases acquires rooms and names their owners. A thin adapter over
// *lease.Manager satisfies it.
type Leases interface {
	// Acquire takes the room's lease for this node, or returns an error
	// matching [Config.ErrHeld] (another node holds it) or
	// [Config.ErrDraining] (this node takes no new rooms).
	Acquire(ctx context.Context, id string) (Lease, error)
	// Owner reads who holds the room: its node id, its gRPC address and
	// its fencing token.
	Owner(ctx context.Context, id string) (node, addr string, fence int64, err error)
}

// Placement is asked before this node acquires a room that has no owner.
// It answers the node the room should be opened on instead (its id and
// gRPC address; [Service.Apply] answers REDIRECT to it), empty strings to
// open it here, or an error to refuse the command (nothing written; a
// retry is safe): the room is being handed off by this node right now.
type Placement interface {
	Place(ctx context.Context, id string) (node, addr string, err error)
}

// Heartbeat is a liveness watchdog: a loop calls Beat on every turn, and
// liveness fails when the beats stop (a readiness heartbeat's beat, wrapped, satisfies it).
type Heartbeat interface {
	Beat()
}

// Notifier is told which rooms have new outbox events; [*Outbox] is one.
type Notifier interface {
	Notify(roomID string)
}

// Config configures a [Service].
type Config struct {
	// SnapshotInterval is how often Run snapshots changed rooms; zero
	// means [DefaultSnapshotInterval].
	SnapshotInterval time.Duration
	// SnapshotTurn bounds one of Run's snapshot turns, so that a database
	// that hangs cannot stall the loop (and its heartbeat, and so
	// liveness); zero means SnapshotInterval. Tests that turn the loop
	// every millisecond give the turns a budget they can finish in.
	SnapshotTurn time.Duration
	// SnapshotWriteTimeout bounds each room's write within a snapshot
	// turn (SnapshotAll); zero means [DefaultSnapshotWriteTimeout]. The
	// write holds the room, so commands for it wait behind the write: with
	// the database slow or a table locked, a write bounded only by the turn
	// would hold them for the whole turn, longer than a drain gives its
	// in-flight requests, and the drain's flush would never run. A write
	// that gives up is logged and retried at the next turn; the command log
	// keeps every acknowledged command meanwhile.
	SnapshotWriteTimeout time.Duration
	// ErrHeld is the error (matched with errors.Is) Leases.Acquire returns
	// when another node holds the room, e.g. lease.ErrHeld. Required.
	ErrHeld error
	// ErrDraining is the error (matched with errors.Is) Leases.Acquire
	// returns once this node takes no new rooms, e.g. lease.ErrDraining.
	// Required.
	ErrDraining error
	// Heartbeat is beaten by every turn of Run; nil means none.
	Heartbeat Heartbeat
	// Outbox is told about rooms with new events; nil means none.
	Outbox Notifier
	// SnapshotFailures counts failed snapshot writes, periodic or on
	// drain (room_snapshot_flush_failures_total); nil means not counted.
	SnapshotFailures prometheus.Counter
	// Logger receives cell and snapshot logs; nil means slog.Default().
	Logger *slog.Logger
	// Placement, when set, may send a room without an owner to another
	// node before this one acquires it; nil means acquire here.
	Placement Placement
	// Snapshots, when set, keeps snapshots in MySQL instead of Redis; the
	// command log stays in Redis. Nil means Redis.
	Snapshots *SQLSnapshots
	// WaitReplicas is how many replicas must have a command (Redis WAIT)
	// before Apply acknowledges it; zero acknowledges what the primary
	// applied. Replication is asynchronous: without it, a failover, a
	// planned one most of all, discards acknowledged commands. A command
	// the replicas did not confirm in time is answered as of unknown
	// outcome, and its resend is deduplicated; a room loaded to answer it
	// is confirmed the same way. docs/leases.md ("Guarantees") has the
	// cost: while fewer replicas are connected, every command fails so.
	WaitReplicas int
}

// Validate names the first field that is unusable.
func (c Config) Validate() error {
	switch {
	case c.SnapshotInterval < 0:
		return fmt.Errorf("room: SnapshotInterval %s is negative", c.SnapshotInterval)
	case c.SnapshotTurn < 0:
		return fmt.Errorf("room: SnapshotTurn %s is negative", c.SnapshotTurn)
	case c.SnapshotWriteTimeout < 0:
		return fmt.Errorf("room: SnapshotWriteTimeout %s is negative", c.SnapshotWriteTimeout)
	case c.WaitReplicas < 0:
		return fmt.Errorf("room: WaitReplicas %d is negative", c.WaitReplicas)
	case c.ErrHeld == nil:
		return errors.New("room: ErrHeld is nil; set it to the lease package's held error")
	case c.ErrDraining == nil:
		return errors.New("room: ErrDraining is nil; set it to the lease package's draining error")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.SnapshotTurn == 0 {
		c.SnapshotTurn = c.SnapshotInterval
	}
	if c.SnapshotWriteTimeout == 0 {
		c.SnapshotWriteTimeout = DefaultSnapshotWriteTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
