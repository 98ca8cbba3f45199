package main

import (
	"context"
	"hash/fnv"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
)

// hrwBalancer is the name of the gateway's balancer for room commands:
// rendezvous (highest random weight) hashing of the room id over the ready
// backends. A room without an owner is acquired by the node its first
// command reaches, so sending every room's commands to the room's
// preferred ready node spreads ownership about evenly, the same way from
// every gateway, and a crash affects about 1/N of the rooms. A room owned
// elsewhere (it moved while its preferred node drained) answers REDIRECT,
// which the gateway follows. Calls without a room (reads) go round robin.
const hrwBalancer = "room_hrw"

func init() {
	// base.Config.HealthCheck: only backends SERVING room-service are
	// ready, so a draining node gets no new command.
	balancer.Register(base.NewBalancerBuilder(hrwBalancer, hrwPickerBuilder{}, base.Config{HealthCheck: true}))
}

type roomKey struct{}

// withRoom marks ctx's calls as commands for room id, which hrwBalancer
// routes to the room's preferred node.
func withRoom(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, roomKey{}, id)
}

type hrwPickerBuilder struct{}

func (hrwPickerBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	if len(info.ReadySCs) == 0 {
		return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
	}
	p := &hrwPicker{}
	for sc, sci := range info.ReadySCs {
		p.nodes = append(p.nodes, hrwNode{sc: sc, addr: sci.Address.Addr})
	}
	return p
}

type hrwNode struct {
	sc   balancer.SubConn
	addr string
}

type hrwPicker struct {
	nodes []hrwNode
	next  atomic.Uint32 // round robin for calls without a room
}

func (p *hrwPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if id, ok := info.Ctx.Value(roomKey{}).(string); ok {
		return balancer.PickResult{SubConn: p.nodes[preferred(id, p.addrs())].sc}, nil
	}
	return balancer.PickResult{SubConn: p.nodes[int(p.next.Add(1))%len(p.nodes)].sc}, nil
}

func (p *hrwPicker) addrs() []string {
	a := make([]string, len(p.nodes))
	for i, n := range p.nodes {
		a[i] = n.addr
	}
	return a
}

// preferred returns the index of room's rendezvous-hash node among addrs:
// the one with the highest weight hash(room, addr). Every gateway computes
// the same answer from the same ready set, and when a node leaves only
// its rooms move.
func preferred(room string, addrs []string) int {
	best, bestW := 0, uint64(0)
	for i, a := range addrs {
		if w := weight(room, a); i == 0 || w > bestW {
			best, bestW = i, w
		}
	}
	return best
}

// weight is FNV-1a of room and addr, finished with a 64-bit mixer so that
// addresses differing in one digit get unrelated weights.
func weight(room, addr string) uint64 {
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
