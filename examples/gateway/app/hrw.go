package app

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

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
// Calls without a room (reads) go round robin. Both skip the addresses
// that stopped answering (see stalls), and a resumed watch the backend
// whose watch ended (withWatchPick).
const hrwBalancer = "room_hrw"

func init() {
	// base.Config.HealthCheck: only backends SERVING room-service are
	// ready, so a draining node gets no new command.
	balancer.Register(base.NewBalancerBuilder(hrwBalancer, hrwPickerBuilder{}, base.Config{HealthCheck: true}))
}

type routeKey struct{}

// route is what a call tells the pickers through its context: the room it
// is a command for ("" for a read), the addresses to avoid, and one to
// leave while another is responsive; the picker records the address it
// picked in picked, if set.
type route struct {
	room   string
	avoid  *stalls
	leave  string
	picked *pick
}

// pick is the address a call was last sent to, and when: the resolver's
// address, which the pickers compare with the stalled ones (the peer's is
// an IP where the resolver may hold a host name).
type pick struct {
	mu   sync.Mutex
	addr string
	at   time.Time
}

func (p *pick) set(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addr, p.at = addr, time.Now()
}

func (p *pick) get() (string, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr, p.at
}

// withRoute marks ctx's calls as a command for room (hrwBalancer routes it
// to the room's preferred node) or, with room "", a read; either avoids
// the stalled addresses while another is ready.
func withRoute(ctx context.Context, room string, avoid *stalls) context.Context {
	return context.WithValue(ctx, routeKey{}, route{room: room, avoid: avoid})
}

// withPick is withRoute, recording the picked address in p.
func withPick(ctx context.Context, room string, avoid *stalls, p *pick) context.Context {
	return context.WithValue(ctx, routeKey{}, route{room: room, avoid: avoid, picked: p})
}

// withWatchPick is withPick for a read that leaves the address leave while
// another is responsive: a watch resumed after its backend ended it goes
// to another node, since whatever ended it (a drain, reads of the room
// failing there) is likely still there.
func withWatchPick(ctx context.Context, avoid *stalls, leave string, p *pick) context.Context {
	return context.WithValue(ctx, routeKey{}, route{avoid: avoid, leave: leave, picked: p})
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
// are fixed when the picker is built, so a pick allocates nothing unless
// an address is stalled or a watch leaves one.
type hrwPicker struct {
	scs   []balancer.SubConn
	addrs []string
	next  atomic.Uint32 // round robin for calls without a room
}

func (p *hrwPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	r, _ := info.Ctx.Value(routeKey{}).(route)
	scs, addrs := p.responsive(r.avoid, r.leave)
	i := int(p.next.Add(1)) % len(scs)
	if r.room != "" {
		i = preferred(r.room, addrs)
	}
	if r.picked != nil {
		r.picked.set(addrs[i])
	}
	return balancer.PickResult{SubConn: scs[i]}, nil
}

// responsive returns the ready SubConns and addresses that are not stalled
// and not leave, or without leave's exclusion when nothing else is left,
// or all of them when every one is stalled: the attempt's budget then
// bounds the wait, and a node that wakes is used at once.
func (p *hrwPicker) responsive(avoid *stalls, leave string) ([]balancer.SubConn, []string) {
	if !avoid.any() && leave == "" {
		return p.scs, p.addrs
	}
	var scs []balancer.SubConn
	var addrs []string
	for i, a := range p.addrs {
		if !avoid.stalled(a) && a != leave {
			scs, addrs = append(scs, p.scs[i]), append(addrs, a)
		}
	}
	switch {
	case len(scs) > 0:
		return scs, addrs
	case leave != "":
		return p.responsive(avoid, "")
	default:
		return p.scs, p.addrs
	}
}

// preferred returns the index of room's rendezvous-hash node among addrs
// (see hrw.Preferred): room-service ranks nodes with the same function when
// it moves rooms towards their preferred nodes.
func preferred(room string, addrs []string) int { return hrw.Preferred(room, addrs) }
