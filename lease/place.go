package lease

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Place returns where room id is served: its holder, as [Manager.Owner]
// returns it, or, if nobody holds it (or its holder's session ended), the
// node that rendezvous hashing of id picks among the live sessions not
// draining, with Fence 0. Every Manager picks the same node, so placed
// rooms spread evenly and a node leaving moves only its own; a crashed
// node is picked until its session expires. An error matching [ErrNotHeld]
// says no node is active. docs/leases.md ("Placing rooms") has its costs.
func (m *Manager) Place(ctx context.Context, id string) (Owner, error) {
	o, err := m.Owner(ctx, id)
	if !errors.Is(err, ErrNotHeld) {
		return o, err
	}
	nodes, err := m.activeNodes(ctx)
	if err != nil {
		return Owner{}, fmt.Errorf("lease: place %q: %w", id, err)
	}
	var best Owner
	var bestWeight uint64
	for _, n := range nodes {
		if w := weight(id, n.Node); best.Node == "" || w > bestWeight || w == bestWeight && n.Node < best.Node {
			best, bestWeight = n, w
		}
	}
	if best.Node == "" {
		return Owner{}, fmt.Errorf("lease: place %q: no node's session is alive and active: %w", id, ErrNotHeld)
	}
	return best, nil
}

// weight is rendezvous hashing's weight of node for room: FNV-1a of both,
// finished with a 64-bit mixer so that node ids differing in one digit get
// unrelated weights.
func weight(room, node string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(room))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(node))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	return x ^ x>>33
}

// indexKey is the index of sessions: a hash of node id → the epoch it last
// started, written after the session, so that Place can list the nodes.
func (m *Manager) indexKey() string { return m.cfg.NodePrefix + "index" }

// listEvery is how often, in TTLs, the renewer writes the node's entry
// into the index of sessions again: an entry lost while its session lives
// (a failover of the index's primary, a DEL) is back within it.
const listEvery = 10

// listing is a write of the node's entry into the index of sessions.
type listing struct {
	epoch int64
	at    time.Time
}

// listSession writes epoch into the index of sessions, if the last write
// was of another epoch or is listEvery TTLs old; a failure is tried again
// at the next renewal.
func (m *Manager) listSession(ctx context.Context, epoch int64) {
	now := m.now()
	if l := m.listed.Load(); l != nil && l.epoch == epoch && now.Before(l.at.Add(listEvery*m.cfg.TTL)) {
		return
	}
	if err := m.client.HSet(ctx, m.indexKey(), m.cfg.Node, epoch).Err(); err != nil {
		m.cfg.Logger.Debug("lease session not listed yet; tried again at the next renewal", "node_id", m.cfg.Node, "error", err)
		return
	}
	m.listed.Store(&listing{epoch: epoch, at: now})
}

// activeNodes returns the nodes of the index whose session is alive and
// active, and drops from the index those whose session ended.
func (m *Manager) activeNodes(ctx context.Context) ([]Owner, error) {
	var index map[string]string
	var nodes []string
	var sessions []*redis.SliceCmd
	err := m.retry(ctx, nil, func(ctx context.Context) error {
		var err error
		nodes, sessions = nodes[:0], sessions[:0] // nothing of a failed attempt
		if index, err = m.client.HGetAll(ctx, m.indexKey()).Result(); err != nil || len(index) == 0 {
			return err
		}
		pipe := m.client.Pipeline() // one round trip per Cluster primary, sent together
		for node := range index {
			nodes = append(nodes, node)
			sessions = append(sessions, pipe.HMGet(ctx, m.nodeKeyOf(node), "addr", "state", "epoch"))
		}
		_, err = pipe.Exec(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sessions %s: %w", m.indexKey(), err)
	}
	var active []Owner
	var ended []any
	for i, node := range nodes {
		var s nodeSession
		if err := sessions[i].Scan(&s); err != nil {
			return nil, fmt.Errorf("session of node %q: %w", node, err)
		}
		switch {
		case s.Epoch == "":
			ended = append(ended, node, index[node])
		case s.State == stateActive && (node != m.cfg.Node || !m.draining()): // its renewal may not have said so yet
			active = append(active, Owner{Node: node, Addr: s.Addr})
		}
	}
	if len(ended) > 0 { // best effort: the next Place drops them otherwise
		_ = nodeForgetScript.Run(ctx, m.client, []string{m.indexKey()}, ended...).Err()
	}
	return active, nil
}
