package main

import (
	"slices"

	"github.com/drainkit/drainkit/examples/internal/hrw"
)

// nodeLoad is one room-service as the balance table shows it.
type nodeLoad struct {
	Node     string `json:"-"`
	Addr     string `json:"addr"`
	Rooms    int    `json:"rooms"`
	Draining bool   `json:"draining"`
	// AtUnixMs is when the entry was written, UntilUnixMs when it stops
	// counting unless renewed: a node that crashed drops out of the table
	// by itself.
	AtUnixMs    int64 `json:"at_unix_ms"`
	UntilUnixMs int64 `json:"until_unix_ms"`
}

// move is one room to hand off and the node it goes to.
type move struct {
	Room string
	To   nodeLoad
}

// planMove picks at most one of self's rooms to hand off, by rendezvous
// hashing with bounded loads over the nodes that are not draining: a room
// belongs to the first node in its rendezvous ranking whose load is under
// the cap ceil(rooms/nodes), self counting as having space for the rooms it
// holds. So:
//
//   - a node over the cap hands a room to the best-ranked node under it;
//   - otherwise a room moves up its ranking to a node under the cap;
//   - a room never moves down its ranking unless its node is over the cap.
//
// Moves made one at a time against an up-to-date table end: no move puts
// a node over the cap, shedding stops once no node is over it, and every
// other move raises a room in its ranking. So at rest no node holds more
// than ceil(rooms/nodes). Nodes that decide at once from the same table
// can briefly overfill a target by one; it sheds at its next turn.
//
// held is self's rooms (its own count in the table is ignored: held is
// fresher); table is every live node, self included. Rooms are considered
// in sorted order so the choice is deterministic.
func planMove(self string, held []string, table []nodeLoad) (move, bool) {
	var nodes []nodeLoad
	selfAt := -1
	total := 0
	for _, n := range table {
		if n.Draining {
			if n.Node == self {
				return move{}, false // the drain hands everything off
			}
			continue
		}
		if n.Node == self {
			selfAt, n.Rooms = len(nodes), len(held)
		}
		nodes = append(nodes, n)
		total += n.Rooms
	}
	if selfAt < 0 || len(nodes) < 2 {
		return move{}, false
	}
	limit := (total + len(nodes) - 1) / len(nodes)
	over := nodes[selfAt].Rooms > limit
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	for _, room := range slices.Sorted(slices.Values(held)) {
		for _, i := range hrw.Rank(room, addrs) {
			if i == selfAt {
				if over {
					continue // shedding: any node under the cap will do
				}
				break // self is the best node with space: stay
			}
			if nodes[i].Rooms < limit {
				return move{Room: room, To: nodes[i]}, true
			}
		}
	}
	return move{}, false
}
