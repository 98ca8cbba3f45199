package room

import (
	"fmt"
	"regexp"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/lease"
)

// The Redis keys of one room. Every key carries the room id as its hash tag
// ({ID}), so each script touches a single slot and runs on Redis Cluster.
// [RouteKey] belongs to the lease package (value node|leaseID|fence); this
// package only reads it inside its fenced scripts.
func logKey(id string) string    { return "room:log:{" + id + "}" }
func cmdsKey(id string) string   { return "room:cmds:{" + id + "}" }
func seqKey(id string) string    { return "room:seq:{" + id + "}" }
func snapKey(id string) string   { return "room:snap:{" + id + "}" }
func outboxKey(id string) string { return "room:outbox:{" + id + "}" }

// RouteKey is the lease key of room id, as a [lease.Manager] with the
// default [lease.Config.RoutePrefix] names it: room-service leaves the prefix
// at its default, and this is the one place that builds the key outside
// the lease package.
func RouteKey(id string) string { return lease.DefaultRoutePrefix + "{" + id + "}" }

// MaxIDLen bounds room and command ids, so a key or a log entry stays small.
const MaxIDLen = 64

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidateRoomID reports whether id can name a room: 1 to [MaxIDLen]
// characters of [A-Za-z0-9_-]. Braces in particular would break the hash
// tag that keeps a room's keys in one Cluster slot.
func ValidateRoomID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("room: room_id %q: want 1 to %d characters of [A-Za-z0-9_-]", id, MaxIDLen)
	}
	return nil
}

// validateCommandID applies the same rule to command ids, which become
// stream field values and dedup hash fields.
func validateCommandID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("room: command_id %q: want 1 to %d characters of [A-Za-z0-9_-]", id, MaxIDLen)
	}
	return nil
}

// validateOp refuses an op outside the closed set [roompb.Ops]. The gateway
// refuses those already; this is the defence behind it, for any other
// client of the gRPC API.
func validateOp(op string) error {
	if err := roompb.CheckOp(op); err != nil {
		return fmt.Errorf("room: %w", err)
	}
	return nil
}
