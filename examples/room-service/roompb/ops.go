package roompb

import (
	"fmt"
	"slices"
	"strings"
)

// The ops a room accepts: the closed set of values of ApplyRequest.op. They
// are what the README, the rolling-update demo and the end-to-end load send.
const (
	// OpHello greets the room.
	OpHello = "hello"
	// OpJoin joins the room.
	OpJoin = "join"
)

var ops = []string{OpHello, OpJoin}

// Ops returns the ops a room accepts, sorted.
func Ops() []string { return slices.Clone(ops) }

// CheckOp returns nil when op is one of [Ops], and otherwise an error that
// names the field and the value (cut short when long, so an error never
// echoes a large body back). The gateway checks it before forwarding a
// command, room-service again before writing one: an op outside the set is
// never stored, published or acknowledged.
func CheckOp(op string) error {
	if slices.Contains(ops, op) {
		return nil
	}
	v := fmt.Sprintf("%q", op)
	if len(op) > 64 {
		v = fmt.Sprintf("%q…", op[:64])
	}
	return fmt.Errorf("op %s: want one of %s", v, strings.Join(ops, ", "))
}
