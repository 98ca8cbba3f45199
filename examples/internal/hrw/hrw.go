// Package hrw is rendezvous (highest random weight) hashing of room ids
// over node addresses, shared by the gateway, which routes a room's first
// command to its preferred node, and room-service, which moves rooms
// towards their preferred nodes. Both must rank nodes the same way, or a
// room moved by one would be routed back by the other.
package hrw

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// Weight is the weight of addr for room: FNV-1a of room and addr, finished
// with a 64-bit mixer so that addresses differing in one digit get
// unrelated weights.
func Weight(room, addr string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(room))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(addr))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Preferred returns the index of room's preferred node among addrs: the one
// with the highest Weight. Every caller computes the same answer from the
// same set, and when a node leaves only its rooms change preference.
func Preferred(room string, addrs []string) int {
	best, bestW := 0, uint64(0)
	for i, a := range addrs {
		if w := Weight(room, a); i == 0 || w > bestW {
			best, bestW = i, w
		}
	}
	return best
}

// Rank returns the indexes of addrs in room's order of preference, the
// preferred node first.
func Rank(room string, addrs []string) []int {
	idx := make([]int, len(addrs))
	w := make([]uint64, len(addrs))
	for i, a := range addrs {
		idx[i], w[i] = i, Weight(room, a)
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(w[b], w[a]) })
	return idx
}
