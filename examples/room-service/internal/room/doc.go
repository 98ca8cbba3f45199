// Package room is the domain core of the example room-service: rooms as
// cells owned through Redis leases, a fenced command log, snapshots and an
// outbox. A command is acknowledged only after one Lua script has checked
// the room's fence and written it, so a node that lost its lease writes
// nothing ([ErrFenced]).
//
// examples/room-service/ROOMS.md has the keys, why trimming and MySQL
// snapshots lose nothing, duplicates after trimming, recovery and the
// drain wiring.
package room
