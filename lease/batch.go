package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// maxBatch caps the keys of one script call, since Redis runs nothing else
// meanwhile; calls to one primary share a pipeline, so the cap costs no
// round trips.
const maxBatch = 500

// batches splits leases into script calls of at most maxBatch leases that
// may share one: a script may only touch keys of the server it runs on, so
// a call holds one hash slot on Cluster and one lease on a custom client.
func (m *Manager) batches(leases []*Lease) [][]*Lease {
	switch m.client.(type) {
	case *redis.Client:
		return slices.Collect(slices.Chunk(leases, maxBatch))
	case *redis.ClusterClient:
		sorted := slices.Clone(leases)
		slices.SortFunc(sorted, func(a, b *Lease) int { return int(a.slot) - int(b.slot) })
		var out [][]*Lease
		for len(sorted) > 0 {
			n := 1
			for n < len(sorted) && n < maxBatch && sorted[n].slot == sorted[0].slot {
				n++
			}
			out, sorted = append(out, sorted[:n:n]), sorted[n:]
		}
		return out
	}
	return slices.Collect(slices.Chunk(leases, 1))
}

// keySlot is the Redis Cluster slot of key: CRC16 (XMODEM) of its hash tag,
// modulo 16384. go-redis computes it in an internal package only.
func keySlot(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// batchCall is one script call over a batch of leases.
type batchCall struct {
	leases []*Lease
	keys   []string
	args   []any
	cmd    *redis.Cmd
	status []int8 // one per lease once decoded; nil if the call failed
	err    error
}

// sendBatches sends one call of script per batch (KEYS the route keys,
// ARGV each route value): one pipeline per Redis primary, sent together.
// Calls answered NOSCRIPT go again as EVAL. The error is the pipelines'
// joined.
//
// One pipeline per primary, not one for all: when a primary dies, go-redis's
// Cluster pipeline retries its commands until the deadline and then sets
// the deadline's error on every command of the pipeline, answered ones
// included, so one dead primary would cost the releases of every other.
func (m *Manager) sendBatches(ctx context.Context, script *redis.Script, batches [][]*Lease) ([]batchCall, error) {
	calls := make([]batchCall, len(batches))
	for i, b := range batches {
		c := &calls[i]
		c.leases, c.keys, c.args = b, make([]string, len(b)), make([]any, 0, len(b))
		for j, l := range b {
			c.keys[j] = l.key
			c.args = append(c.args, l.value)
		}
	}
	cl, cluster := m.client.(*redis.ClusterClient)
	if !cluster { // one server: one pipeline, and nothing allocated to group it
		err := m.sendCalls(ctx, m.client.Pipeline(), script, calls, nil)
		decodeAll(calls)
		return calls, err
	}
	groups := m.byPrimary(ctx, cl, calls)
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() { errs[i] = m.sendCalls(ctx, m.client.Pipeline(), script, calls, g) })
	}
	wg.Wait()
	decodeAll(calls)
	return calls, errors.Join(errs...)
}

// decodeAll decodes every call's reply into its statuses.
func decodeAll(calls []batchCall) {
	for i := range calls {
		calls[i].status, calls[i].err = decodeStatuses(calls[i].cmd, len(calls[i].leases))
	}
}

// byPrimary groups calls, by index, by the primary that serves their
// slot, as far as the client's slot map knows. A stale map costs nothing
// but the grouping: the Cluster pipeline still sends each command to its
// slot's primary and follows MOVED and ASK.
func (m *Manager) byPrimary(ctx context.Context, cl *redis.ClusterClient, calls []batchCall) [][]int {
	var groups [][]int
	index := map[*redis.Client]int{}
	for i := range calls {
		primary, _ := cl.MasterForKey(ctx, calls[i].keys[0]) // nil without a slot map: one group for those
		g, ok := index[primary]
		if !ok {
			g = len(groups)
			index[primary] = g
			groups = append(groups, []int{}) // never nil: see sendCalls
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// sendCalls queues the calls at indices which on pipe and sends them; calls answered NOSCRIPT go again as EVAL.
// A nil which sends every call (byPrimary's groups are never nil): an
// iterator or a slice of pointers would cost every release allocations.
func (m *Manager) sendCalls(ctx context.Context, pipe redis.Pipeliner, script *redis.Script, calls []batchCall, which []int) error {
	n := len(which)
	if which == nil {
		n = len(calls)
	}
	call := func(k int) *batchCall {
		if which == nil {
			return &calls[k]
		}
		return &calls[which[k]]
	}
	for k := range n {
		c := call(k)
		c.cmd = script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, err := pipe.Exec(ctx)
	if err != nil {
		retry := m.client.Pipeline()
		for k := range n {
			if c := call(k); isNoScript(c.cmd.Err()) {
				c.cmd = script.Eval(ctx, retry, c.keys, c.args...)
			}
		}
		if retry.Len() > 0 {
			_, err = retry.Exec(ctx)
		}
	}
	return err
}

func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// decodeStatuses decodes a batch script's reply, one status (1, 0 or -1)
// per key. A reply of the wrong shape fails the whole batch: a status is
// never guessed or shifted onto another lease.
func decodeStatuses(cmd *redis.Cmd, n int) ([]int8, error) {
	if err := cmd.Err(); err != nil {
		return nil, err
	}
	reply, ok := cmd.Val().([]any)
	if !ok || len(reply) != n {
		return nil, fmt.Errorf("unexpected reply %v for %d keys", cmd.Val(), n)
	}
	status := make([]int8, n)
	for i, r := range reply {
		v, ok := r.(int64)
		if !ok || v < -1 || v > 1 {
			return nil, fmt.Errorf("unexpected status %v for key %d of %d", r, i+1, n)
		}
		status[i] = int8(v)
	}
	return status, nil
}
