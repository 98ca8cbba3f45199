package app

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"

	"github.com/drainkit/drainkit/examples/internal/hrw"
)

// hrwBalancer is the name of the gateway's balancer for room commands:
// rendezvous (highest random weight) hashing of the room id over the ready
// backends. A room without an owner is acquired by the node its first
// command reaches, so sending every room's commands to the room's
// preferred ready node spreads ownership about evenly, the same way from
// every gateway, and a crash affects about 1/N of the rooms. A room owned
// elsewhere (it moved while its preferred node drained, or room-service
// moved it to even out the load) answers REDIRECT, which the gateway
// follows, and its next commands go to that owner directly (roomOwners).
// Calls without a room (reads) go round robin.
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
		p.scs = append(p.scs, sc)
		p.addrs = append(p.addrs, sci.Address.Addr)
	}
	return p
}

// hrwPicker picks among the ready SubConns; scs[i] serves addrs[i]. Both
// are fixed when the picker is built, so a pick allocates nothing.
type hrwPicker struct {
	scs   []balancer.SubConn
	addrs []string
	next  atomic.Uint32 // round robin for calls without a room
}

func (p *hrwPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if id, ok := info.Ctx.Value(roomKey{}).(string); ok {
		return balancer.PickResult{SubConn: p.scs[preferred(id, p.addrs)]}, nil
	}
	return balancer.PickResult{SubConn: p.scs[int(p.next.Add(1))%len(p.scs)]}, nil
}

// preferred returns the index of room's rendezvous-hash node among addrs
// (see hrw.Preferred): room-service ranks nodes with the same function when
// it moves rooms towards their preferred nodes.
func preferred(room string, addrs []string) int { return hrw.Preferred(room, addrs) }
