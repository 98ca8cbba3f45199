package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Owner is the current holder of a room, for forwarding.
type Owner struct {
	// Node is the holder's node id.
	Node string
	// Addr is the holder's forwarding address from its heartbeat; empty if
	// the heartbeat is gone (the node stopped or cannot reach Redis).
	Addr string
	// Fence is the holder's fencing token.
	Fence int64
	// Draining reports that the holder's heartbeat is marked draining.
	Draining bool
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
		return Owner{}, &heldError{ID: id}
	}
	var hb []any
	err = m.retry(ctx, nil, func(ctx context.Context) (err error) {
		hb, err = m.client.HMGet(ctx, m.nodeKeyOf(node), "addr", "state").Result()
		return err
	})
	if err != nil {
		return Owner{}, fmt.Errorf("lease: heartbeat of %q: %w", node, err)
	}
	o := Owner{Node: node, Fence: fence}
	o.Addr, _ = hb[0].(string)
	state, _ := hb[1].(string)
	o.Draining = state == stateDraining
	return o, nil
}
