// Package room is the domain core of the example room-service: rooms as
// cells owned through Redis leases, a fenced command log, snapshots and an
// outbox.
//
// # Cells and ownership
//
// A room is served by at most one node, the holder of its lease
// room:route:{ID} (value node|leaseID|fence, written by the lease package).
// [Service.Apply] on a node that holds no cell for the room acquires the
// lease through [Leases] and recovers the room; if another node holds it,
// Apply answers REDIRECT with the owner's address. Commands for one room are
// serialized by the cell: that order is the room's single-writer log order.
//
// # Keys
//
// Every key carries the room id as hash tag, so each script is single-slot
// on Redis Cluster:
//
//	room:route:{ID}   lease value node|leaseID|fence (lease package)
//	room:log:{ID}     stream of commands, entry id "<seq>-1", fields cmd, op
//	room:cmds:{ID}    hash command_id -> seq (dedup, answers DUPLICATE)
//	room:seq:{ID}     last seq (INCR)
//	room:snap:{ID}    hash state (JSON [State]), seq, fence
//	room:outbox:{ID}  list of JSON events waiting for the outbox worker
//
// # Fencing
//
// A command is acknowledged only after one Lua script, which first checks
// that the fence in room:route:{ID} equals the caller's lease token, has
// appended it to the log, recorded its command id and queued its outbox
// event. A node that lost its lease writes nothing ([ErrFenced]) and drops
// the cell; the client gets UNAVAILABLE with a RetryInfo detail (nothing
// was written) and may retry anywhere. Snapshots are fenced the same way and trim the log entries
// they cover.
//
// # Recovery
//
// A new owner reads the snapshot and the log in one MULTI and replays the
// entries after the snapshot; seqs are gap-free, so a gap is an error, not
// a guess. [Service.GetRoom] uses the same read, so any node answers for
// any room with exactly what was acknowledged.
//
// # Drain
//
// Wired by the service's main (not here):
//
//	StopIntake    Outbox.StopFetching
//	WaitInFlight  Outbox.Pause (the batch in progress finishes)
//	Flush         lease hand-off calling Service.FlushRoom per held room,
//	              then releasing that room's lease
//
// [Service.Run] and [Outbox.Run] are the loops behind the liveness
// heartbeats; both beat on every turn, also while draining.
package room
