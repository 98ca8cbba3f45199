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
//	room:log:{ID}     stream of commands, entry id "<seq>-1", fields cmd, op;
//	                  only the commands after the snapshot
//	room:cmds:{ID}    hash command_id -> seq (dedup: a resend gets its first seq);
//	                  only the commands after the snapshot
//	room:seq:{ID}     last seq (INCR)
//	room:snap:{ID}    hash state (JSON [State]), seq, fence
//	room:outbox:{ID}  list of JSON events waiting for the outbox worker;
//	                  an event leaves it once published
//	room:events       the stream events are published to (not per room),
//	                  capped at [OutboxConfig.StreamMaxLen] entries
//
// # Fencing
//
// A command is acknowledged only after one Lua script, which first checks
// that the fence in room:route:{ID} equals the caller's lease token, has
// appended it to the log, recorded its command id and queued its outbox
// event. A node that lost its lease writes nothing ([ErrFenced]) and drops
// the cell; the client gets UNAVAILABLE with a RetryInfo detail (nothing
// was written) and may retry anywhere.
//
// # Trimming
//
// Nothing a room writes grows without bound except its state. A snapshot
// is written by one fenced script that also removes what it folds: the log
// entries up to its seq and their command ids in room:cmds:{ID}. Being one
// script, a crash cannot separate the snapshot from the trim, so nothing is
// ever trimmed that the snapshot does not hold; being fenced, only the
// holder of the current fencing token trims. The next owner recovers from
// snapshot + the log after it, exactly as before.
//
// # Snapshots in MySQL
//
// With [Config.Snapshots] set, snapshots live in MySQL ([SQLSnapshots]:
// one row per room, the schema created and versioned at start) and the
// command log stays in Redis. A snapshot row carries the fencing token it
// was written under, and MySQL applies a write only when the stored row's
// token and seq are not newer, so a late writer never overwrites a newer
// owner's snapshot. The trim then runs in Redis under the same fence, after
// the row is stored: a crash between the two leaves entries the snapshot
// already covers, which recovery skips. Recovery reads the log first and
// the row second, so a snapshot taken between the two reads cannot open a
// gap.
//
// A room's outbox list loses an event only after the event was published
// to the events stream; the stream itself is capped (XADD MAXLEN ~) at
// [OutboxConfig.StreamMaxLen], so a consumer must read it within that many
// events (it carries event_id for deduplication, not for replay from the
// beginning of time).
//
// # Duplicates after trimming
//
// The decision: a command_id is deduplicated for the life of the room,
// trimmed or not, so no retry is ever too late. A retry is answered with
// what the first application produced, APPLIED at the original seq, on
// every path:
//
//   - a command after the snapshot: the append script finds it in
//     room:cmds:{ID}, before the fence check, whichever node asks;
//   - a command folded into the snapshot: the snapshot's [State] lists
//     every applied command id at its seq (CommandIDs[i] has seq i+1), so
//     the hash entry was redundant and the owner's cell, recovered from
//     snapshot + log, answers from its index before any write;
//   - a folded command sent to a node that lost the room without noticing
//     yet: the fenced script writes nothing and the node answers
//     UNAVAILABLE with RetryInfo (true: this attempt wrote nothing), so the
//     retry reaches the owner, which answers APPLIED at the original seq.
//
// This rests on the state holding every command id, which the example's
// state does by design (it is what the read-back checks). A service whose
// state does not would keep a bounded window of recent ids in its snapshot
// instead, and would then have to refuse, not apply, a retry older than
// that window.
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
//	              then releasing that room's lease; bounded on its own, so
//	              a room not flushed in time is left to expire
//
// [Service.Run] and [Outbox.Run] are the loops behind the liveness
// heartbeats; both beat on every turn, also while draining, the outbox
// after every batch too. Each batch is bounded by
// [OutboxConfig.BatchTimeout] and one that fails ends its turn, so a Redis
// that does not answer shows in readiness, never in liveness.
//
// A snapshot write holds its room, so commands for the room wait behind
// it. Each periodic write is bounded on its own by
// [Config.SnapshotWriteTimeout] (1 s by default), not only by the turn: with
// the database slow or its table locked, a command waits at most that
// long, so a drain's in-flight commands end in time for the flush. A write
// that gives up is logged and retried at the next turn.
package room
