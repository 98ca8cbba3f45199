package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Owner is the current holder of a room, for forwarding.
type Owner struct {
	Node     string // the holder's node id
	Addr     string // the holder's forwarding address, from its session (Config.Addr)
	Fence    int64  // the holder's fencing token
	Draining bool   // the holder's session is marked draining
}

// Owner returns the current holder of room id: [ErrNotHeld] if nobody
// holds it (no route, or its session ended), an error matching [ErrHeld]
// if the route value cannot be parsed, [ErrInvalidID] for a bad id. It
// reads the route, then the holder's session: two round trips, as the
// keys are in two slots, each retried within ctx (without a deadline, a
// TTL) while Redis fails; the error then counts the attempts.
func (m *Manager) Owner(ctx context.Context, id string) (Owner, error) {
	if err := validateID(id); err != nil {
		return Owner{}, err
	}
	var v string
	var ttl time.Duration
	err := m.retry(ctx, nil, func(ctx context.Context) error {
		// One slot, one round trip. A route with a TTL (earlier format) is held.
		pipe := m.client.Pipeline()
		get, pttl := pipe.Get(ctx, m.routeKey(id)), pipe.PTTL(ctx, m.routeKey(id))
		_, _ = pipe.Exec(ctx)
		v, ttl = get.Val(), pttl.Val()
		return get.Err()
	})
	if errors.Is(err, redis.Nil) {
		return Owner{}, fmt.Errorf("lease: owner of %q: %w", id, ErrNotHeld)
	}
	if err != nil {
		return Owner{}, fmt.Errorf("lease: owner of %q: %w", id, err)
	}
	node, epoch, fence, ok := parseValue(v)
	if !ok {
		return Owner{}, heldBy(id, "", 0)
	}
	sess, err := m.nodeSession(ctx, node)
	if err != nil {
		return Owner{}, fmt.Errorf("lease: %w", err)
	}
	if ttl == -1 && sess.ended(epoch) {
		return Owner{}, fmt.Errorf("lease: owner of %q: the session of node %q that held it ended: %w", id, node, ErrNotHeld)
	}
	return Owner{Node: node, Addr: sess.Addr, Fence: fence, Draining: sess.State == stateDraining}, nil
}

// nodeSession is a node's session as Redis holds it; every field is ""
// once the session is gone.
type nodeSession struct {
	Addr  string `redis:"addr"`
	State string `redis:"state"`
	Epoch string `redis:"epoch"`
}

func (s nodeSession) ended(epoch string) bool { return s.Epoch == "" || s.Epoch != epoch }

// nodeSession reads node's session.
func (m *Manager) nodeSession(ctx context.Context, node string) (nodeSession, error) {
	var s nodeSession
	err := m.retry(ctx, nil, func(ctx context.Context) error {
		return m.client.HMGet(ctx, m.nodeKeyOf(node), "addr", "state", "epoch").Scan(&s)
	})
	if err != nil {
		return nodeSession{}, fmt.Errorf("session of node %q: %w", node, err)
	}
	return s, nil
}

// Probe is a readiness check for the lease machinery: it succeeds if this
// node's session is current and its TTL in Redis is above TTL/3 (less
// means renewals are failing). It answers within [ProbeTimeout] and
// writes nothing.
func (m *Manager) Probe(ctx context.Context) error {
	err := m.probe(ctx)
	if err != nil {
		m.met.checkFailures.Inc()
	}
	return err
}

func (m *Manager) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(ProbeTimeout, m.cfg.CallTimeout))
	defer cancel()
	s := m.sess.Load()
	if s == nil {
		m.mu.Lock()
		running := m.running
		m.mu.Unlock()
		if !running { // nothing will start one: not the "started again" a lost session gets
			return fmt.Errorf("lease: probe: no session %s: the lease manager is not running (not started yet, its Start failed, or stopped)", m.nodeKey())
		}
		return fmt.Errorf("lease: probe: no session %s: it was lost and is being started again", m.nodeKey())
	}
	n, err := probeScript.Run(ctx, m.client, []string{m.nodeKey()}, s.epoch).Int64()
	if err != nil {
		return fmt.Errorf("lease: probe %s: %w", m.nodeKey(), err)
	}
	switch {
	case n == -2:
		return fmt.Errorf("lease: probe: session %s is missing", m.nodeKey())
	case n == -1:
		return fmt.Errorf("lease: probe: session %s has another epoch than %d: another process with node id %q replaced it", m.nodeKey(), s.epoch, m.cfg.Node)
	case n == -3:
		return fmt.Errorf("lease: probe: session %s has no TTL: something other than this node's renewer wrote it", m.nodeKey())
	case time.Duration(n)*time.Millisecond <= m.cfg.TTL/3:
		return fmt.Errorf("lease: probe: session %s TTL %dms is at or below TTL/3 (%s): renewals are failing", m.nodeKey(), n, m.cfg.TTL/3)
	}
	return nil
}
