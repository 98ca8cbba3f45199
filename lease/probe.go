package lease

import (
	"context"
	"fmt"
	"time"
)

// Probe is a readiness check for the lease machinery: it succeeds if this
// node's heartbeat is ours and its TTL is above TTL/3 (less means renewals
// are failing). It answers within [ProbeTimeout] and writes nothing.
func (m *Manager) Probe(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			m.met.checkFailures.Inc()
		}
	}()
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
