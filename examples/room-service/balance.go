package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/examples/room-service/internal/room"
	"github.com/drainkit/drainkit/lease"
	"github.com/drainkit/drainkit/lifecycle"
)

// DefaultBalanceInterval is how often a room-service publishes its load and
// may hand one room off to a better node (BALANCE_INTERVAL).
const DefaultBalanceInterval = time.Second

// balanceKey is the balance table: a hash of node id → nodeLoad (JSON). One
// key, so one slot on Redis Cluster.
const balanceKey = "room:balance"

// placeKey names the node a room handed off for balance goes to, for the
// next node asked to acquire it. The room id is its hash tag.
func placeKey(id string) string { return "room:place:{" + id + "}" }

// errMoving refuses a command for a room this node is handing off right
// now: nothing was written, and a retry finds the room at its new node.
var errMoving = errors.New("room is being handed off to another node; retry")

// balancer moves rooms towards the nodes rendezvous hashing with bounded
// loads prefers (planMove), which the gateways' routing cannot do on its
// own: it places only rooms without an owner, so rooms first touched
// while few nodes were ready, or during a rolling update, stay where they
// landed, and rendezvous hashing alone often puts 9 of 20 rooms on one of
// three nodes.
//
// Every node publishes its room count in the balance table each turn and
// reads everyone's. A move is the drain's graceful hand-off of one room:
// the room's next node is written to room:place:{id}, the room's snapshot
// is flushed, then its lease released; the next command, wherever the
// gateway sends it, is redirected to that node (Place), which acquires
// with a higher fence. A live lease is never taken; a room is never sent
// to a node the table shows draining (nor moved by one: its drain hands
// rooms off) or whose entry missed its last turn (see answers); each node moves at most one room per turn, and turns are
// jittered, so a joining node receives rooms paced.
//
// The nodes rank each other by their advertised addresses (ADVERTISE_ADDR)
// with the gateways' hash (package hrw), so ADVERTISE_ADDR must be the
// address the gateways dial. Entries expire by the writer's clock: nodes
// whose clocks differ by much more than a turn see each other come and go.
type balancer struct {
	rdb      redis.UniversalClient
	leases   *heldLeases
	svc      *room.Service
	state    func() lifecycle.State
	self     nodeLoad
	interval time.Duration
	log      *slog.Logger

	drained chan struct{} // closed at the flip to draining, which happens once

	// Owned by Run's goroutine (turn and handOff run there, one at a time).
	calm int    // turns in a row that reached Redis; moves wait for settleTurns of them
	sent []sent // recent hand-offs, for loads the table does not show yet

	mu     sync.Mutex
	moving map[string]bool // rooms being handed off by this node; Place reads it
}

// sent is a room this node handed off towards node at a moment, and when
// this node first saw it owned again.
type sent struct {
	room, node  string
	at, ownedAt time.Time
}

// newBalancer returns the balancer of node, over the leases it holds; set
// svc before Run.
func newBalancer(rdb redis.UniversalClient, leases *heldLeases, lm *lifecycle.Manager, node string, c config, log *slog.Logger) *balancer {
	b := &balancer{
		rdb: rdb, leases: leases, state: lm.State,
		self:     nodeLoad{Node: node, Addr: c.Advertise},
		interval: c.BalanceInterval,
		log:      log,
		drained:  make(chan struct{}),
		moving:   make(map[string]bool),
	}
	// Publish draining at once, so no node hands this one a room; the
	// listener runs at the flip and must not block on Redis.
	lm.OnTransition(func(t lifecycle.Transition) {
		if t.To == lifecycle.Draining {
			close(b.drained)
		}
	})
	return b
}

// Run publishes this node's load every turn, jittered around the
// interval, and hands off at most one room per turn; at the flip to
// draining it publishes that at once. It returns when ctx ends, after
// removing this node's entry. A zero interval turns balancing off.
func (b *balancer) Run(ctx context.Context) error {
	if b.interval <= 0 {
		return nil
	}
	defer b.leave()
	pace(ctx, b.interval, b.drained, b.turn)
	return nil
}

// pace calls turn every interval, jittered uniformly within ±half of it so
// that nodes started together do not decide together, and at once when
// wake closes, until ctx ends.
func pace(ctx context.Context, interval time.Duration, wake <-chan struct{}, turn func(context.Context)) {
	for {
		t := time.NewTimer(interval/2 + rand.N(interval))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-wake:
			wake = nil // once
		case <-t.C:
		}
		t.Stop()
		turn(ctx)
	}
}

// turn publishes, reads the table, and makes at most one move.
func (b *balancer) turn(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, b.interval)
	defer cancel()
	held := b.leases.ids()
	me := b.self
	st := b.state()
	me.Rooms, me.Draining = len(held), st == lifecycle.Draining || st == lifecycle.Stopped
	table, err := b.publish(ctx, me)
	if !b.settled(err == nil) {
		if err != nil {
			b.log.Warn("balance table not updated", "err", err)
		}
		return
	}
	if st != lifecycle.Running {
		return
	}
	if mv, ok := planMove(me.Node, held, b.inTransit(ctx, b.answering(table, me.Node))); ok {
		b.handOff(ctx, mv)
	}
}

// settled records whether a turn reached Redis and reports whether moves
// may be made.
func (b *balancer) settled(reached bool) bool {
	// After a start or a Redis fault the table lacks entries that expired
	// meanwhile, and the rooms are being re-acquired wherever their
	// commands land, under the backlog of requests that waited the fault
	// out: a move then would add a hand-off to that backlog and be made on
	// a partial table. Moves wait until every node has had a few turns to
	// publish.
	if !reached {
		b.calm = 0
		return false
	}
	b.calm++
	return b.calm > settleTurns
}

// inTransit adds to each node's load the rooms this node handed it that
// its entry does not count yet: those nobody has acquired since, and those
// acquired after the entry was written. Without them a node would count
// the same spare room of a target at several turns in a row and overfill
// it. A room nobody acquired while its next-node note lasted is dropped.
func (b *balancer) inTransit(ctx context.Context, table []nodeLoad) []nodeLoad {
	var keep []sent
	for _, s := range b.sent {
		if s.ownedAt.IsZero() {
			n, err := b.rdb.Exists(ctx, room.RouteKey(s.room)).Result()
			switch {
			case err != nil:
			case n == 1:
				s.ownedAt = time.Now()
			case time.Since(s.at) > b.placeTTL():
				continue // never arrived
			}
		}
		i := slices.IndexFunc(table, func(n nodeLoad) bool { return n.Node == s.node })
		if i < 0 || (!s.ownedAt.IsZero() && table[i].AtUnixMs > s.ownedAt.UnixMilli()) {
			continue // gone, or its entry counts the room
		}
		table[i].Rooms++
		keep = append(keep, s)
	}
	b.sent = keep
	return table
}

// placeTTL is how long a next-node note lasts.
func (b *balancer) placeTTL() time.Duration { return max(3*b.interval, 2*time.Second) }

// publish writes me and returns the live entries, removing expired ones.
func (b *balancer) publish(ctx context.Context, me nodeLoad) ([]nodeLoad, error) {
	now := time.Now()
	me.AtUnixMs, me.UntilUnixMs = now.UnixMilli(), now.Add(3*b.interval).UnixMilli()
	v, err := json.Marshal(me)
	if err != nil {
		return nil, err
	}
	// One round trip: the write, then the table with it.
	pipe := b.rdb.Pipeline()
	pipe.HSet(ctx, balanceKey, me.Node, v)
	get := pipe.HGetAll(ctx, balanceKey)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	all := get.Val()
	var live []nodeLoad
	for node, v := range all {
		n, ok := parseLoad(node, v, now)
		if !ok {
			_ = b.rdb.HDel(ctx, balanceKey, node).Err() // expired: its node crashed or left
			continue
		}
		live = append(live, n)
	}
	return live, nil
}

// parseLoad reads an entry of the table; false if unreadable or expired.
func parseLoad(node, v string, now time.Time) (nodeLoad, bool) {
	var n nodeLoad
	if err := json.Unmarshal([]byte(v), &n); err != nil || n.Addr == "" || n.UntilUnixMs < now.UnixMilli() {
		return nodeLoad{}, false
	}
	n.Node = node
	return n, true
}

// handOff moves mv.Room to mv.To: the target is read again (never a
// draining one), the room's next node written, the room flushed, then its
// lease released. While it runs this node refuses to reacquire the room
// (Place). If the flush fails the room stays here, its lease and state
// kept (room.Service.MoveRoom), and the drain flushes it again.
func (b *balancer) handOff(ctx context.Context, mv move) {
	l := b.leases.get(mv.Room)
	if l == nil {
		return
	}
	if !b.begin(mv.Room) {
		return
	}
	defer b.end(mv.Room)
	to, err := b.entry(ctx, mv.To.Node)
	if err != nil || to.Draining || !b.answers(to, time.Now()) {
		return // gone, draining or silent since the table was read: next turn
	}
	if err := b.rdb.Set(ctx, placeKey(mv.Room), mv.To.Node, b.placeTTL()).Err(); err != nil {
		b.log.Warn("room not handed off: next node not written", "room_id", mv.Room, "to", mv.To.Node, "err", err)
		return
	}
	at := time.Now()
	if err := b.svc.MoveRoom(ctx, l); err != nil {
		_ = b.rdb.Del(context.WithoutCancel(ctx), placeKey(mv.Room)).Err() // it stays here
		b.log.Warn("room not handed off: snapshot not flushed", "room_id", mv.Room, "to", mv.To.Node, "err", err)
		return
	}
	// In transit from here on (released or left to expire), not before:
	// a room whose flush failed stays here and must not count for mv.To.
	b.sent = append(b.sent, sent{room: mv.Room, node: mv.To.Node, at: at})
	// A drain that began meanwhile owns the lease from its hand-off on:
	// MoveRoom returns nil for a cell the drain's FlushRoom dropped after a
	// failed write, and Release then leaves the lease to the drain, which
	// releases a room it flushed and leaves one it could not to expire.
	switch err := l.Release(ctx); {
	case errors.Is(err, lease.ErrDraining), errors.Is(err, lease.ErrLeftToExpire):
		b.log.Info("room handed off, lease left to the drain", "room_id", mv.Room, "to", mv.To.Node, "err", err)
		return
	case err != nil:
		b.log.Warn("room handed off, lease release failed (it expires)", "room_id", mv.Room, "to", mv.To.Node, "err", err)
		return
	}
	b.log.Info("room handed off for balance", "room_id", mv.Room, "to", mv.To.Node, "fence", l.Token())
}

func (b *balancer) begin(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.moving[id] {
		return false
	}
	b.moving[id] = true
	return true
}

func (b *balancer) end(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.moving, id)
}

// entry reads node's live entry.
func (b *balancer) entry(ctx context.Context, node string) (nodeLoad, error) {
	v, err := b.rdb.HGet(ctx, balanceKey, node).Result()
	if err != nil {
		return nodeLoad{}, err
	}
	n, ok := parseLoad(node, v, time.Now())
	if !ok {
		return nodeLoad{}, fmt.Errorf("balance entry of %s expired", node)
	}
	return n, nil
}

// Place is room.Placement: a room this node is handing off is refused; a
// room handed off towards another live node that is not draining goes
// there; anything else (no hand-off, a target gone or draining, Redis not
// answering) is acquired here.
func (b *balancer) Place(ctx context.Context, id string) (node, addr string, err error) {
	b.mu.Lock()
	moving := b.moving[id]
	b.mu.Unlock()
	if moving {
		return "", "", fmt.Errorf("room %s: %w", id, errMoving)
	}
	if b.leases.get(id) != nil {
		return "", "", nil // held here already (acquire is idempotent)
	}
	to, err := b.rdb.Get(ctx, placeKey(id)).Result()
	switch {
	case err != nil:
		return "", "", nil
	case to == b.self.Node:
		// Arrived: the note has done its work, and must not send the room
		// back here should this node crash holding it.
		_ = b.rdb.Del(ctx, placeKey(id)).Err()
		return "", "", nil
	}
	n, err := b.entry(ctx, to)
	if err != nil || n.Draining || !b.answers(n, time.Now()) {
		return "", "", nil
	}
	return n.Node, n.Addr, nil
}

// answers reports whether n published within its last turn: a node whose
// turn is late (frozen, cut off from Redis) gets no room, and a room sent
// to it before it went silent is taken by whichever node is asked first.
// A turn's writes come at most 2.5 intervals apart (a timer of up to 1.5,
// a turn of up to 1); the quarter second is for the clocks of two hosts.
// A node that froze since its last turn still answers until then; the
// gateways refuse to redirect to it meanwhile.
func (b *balancer) answers(n nodeLoad, now time.Time) bool {
	return now.Sub(time.UnixMilli(n.AtUnixMs)) <= b.interval*5/2+250*time.Millisecond
}

// answering returns the entries of the table that answer (see answers),
// and self's whatever its age: this node is running the turn.
func (b *balancer) answering(table []nodeLoad, self string) []nodeLoad {
	now := time.Now()
	return slices.DeleteFunc(table, func(n nodeLoad) bool { return n.Node != self && !b.answers(n, now) })
}

// leave removes this node's entry, so the others stop counting it at once.
// It runs in the drain's Close phase, so it waits briefly: an entry left
// behind expires within three intervals anyway.
func (b *balancer) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	if err := b.rdb.HDel(ctx, balanceKey, b.self.Node).Err(); err != nil {
		b.log.Warn("balance entry not removed (it expires)", "err", err)
	}
}

// settleTurns is how many turns in a row must reach Redis before a move:
// every live node publishes within three of them (an entry lasts three
// intervals).
const settleTurns = 3

// minBalanceInterval keeps the table's reads and writes (two per node per
// turn) cheap.
const minBalanceInterval = 100 * time.Millisecond
