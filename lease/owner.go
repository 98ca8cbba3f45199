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
	Node string // the holder's node id
	// Addr is the holder's forwarding address from its heartbeat; empty if
	// the heartbeat is gone (the node stopped or cannot reach Redis).
	Addr     string
	Fence    int64 // the holder's fencing token
	Draining bool  // the holder's heartbeat is marked draining
}

// Owner returns the current holder of room id: [ErrNotHeld] if nobody
// holds it, an error matching [ErrHeld] if the route value cannot be
// parsed. It reads the route, then the holder's heartbeat: two calls, as
// the keys are in two slots.
func (m *Manager) Owner(ctx context.Context, id string) (Owner, error) {
	if err := validateID(id); err != nil {
		return Owner{}, err
	}
	var v string
	err := m.retry(ctx, nil, func(ctx context.Context) (err error) {
		v, err = m.client.Get(ctx, m.routeKey(id)).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return Owner{}, fmt.Errorf("lease: owner of %q: %w", id, ErrNotHeld)
	}
	if err != nil {
		return Owner{}, fmt.Errorf("lease: owner of %q: %w", id, err)
	}
	node, fence, ok := parseValue(v)
	if !ok {
		return Owner{}, heldBy(id, "", 0)
	}
	var hb []any
	err = m.retry(ctx, nil, func(ctx context.Context) (err error) {
		hb, err = m.client.HMGet(ctx, m.nodeKeyOf(node), "addr", "state").Result()
		return err
	})
	if err != nil {
		return Owner{}, fmt.Errorf("lease: heartbeat of %q: %w", node, err)
	}
	addr, _ := hb[0].(string) // nil if the heartbeat is gone
	return Owner{Node: node, Addr: addr, Fence: fence, Draining: hb[1] == stateDraining}, nil
}

// Probe is a readiness check for the lease machinery: it succeeds if this
// node's heartbeat is ours and its TTL is above TTL/3 (less means renewals
// are failing). It answers within [ProbeTimeout] and writes nothing.
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
	n, err := probeScript.Run(ctx, m.client, []string{m.nodeKey()}, m.holder).Int64()
	if err != nil {
		return fmt.Errorf("lease: probe %s: %w", m.nodeKey(), err)
	}
	switch {
	case n == -2:
		return fmt.Errorf("lease: probe: heartbeat %s is missing", m.nodeKey())
	case n == -1:
		return fmt.Errorf("lease: probe: heartbeat %s belongs to another process with node id %q", m.nodeKey(), m.cfg.Node)
	case time.Duration(n)*time.Millisecond <= m.cfg.TTL/3:
		return fmt.Errorf("lease: probe: heartbeat %s TTL %dms is at or below TTL/3 (%s): renewals are failing", m.nodeKey(), n, m.cfg.TTL/3)
	}
	return nil
}
