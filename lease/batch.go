package lease

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// maxBatch caps the keys of one renew or release script call. Redis runs
// nothing else while a script runs, so a call must stay short (about half a
// millisecond at this size); many calls still share one pipeline, so the
// cap costs no round trips.
const maxBatch = 500

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// grouping says which leases may share one script call: a script may only
// touch keys the server it runs on owns.
type grouping uint8

const (
	// groupAll: one server holds every key (*redis.Client: standalone or
	// Sentinel), so any leases share a call.
	groupAll grouping = iota
	// groupSlot: Redis Cluster; a script's keys must share one hash slot.
	groupSlot
	// groupNone: a client whose sharding is unknown here (*redis.Ring, or a
	// custom UniversalClient): one lease per call, routed by its own key.
	groupNone
)

// groupingFor picks the grouping for client.
func groupingFor(client redis.UniversalClient) grouping {
	switch client.(type) {
	case *redis.Client:
		return groupAll
	case *redis.ClusterClient:
		return groupSlot
	default:
		return groupNone
	}
}

// batches splits leases into script calls of at most maxBatch leases that
// the grouping allows together. Every lease is in exactly one batch.
func (m *Manager) batches(leases []*Lease) [][]*Lease {
	switch m.grouping {
	case groupAll:
		return chunk(nil, leases)
	case groupSlot:
		return bySlot(leases)
	default:
		out := make([][]*Lease, len(leases))
		for i := range leases {
			out[i] = leases[i : i+1 : i+1]
		}
		return out
	}
}

// chunk appends leases to out in runs of at most maxBatch.
func chunk(out [][]*Lease, leases []*Lease) [][]*Lease {
	for len(leases) > maxBatch {
		out = append(out, leases[:maxBatch:maxBatch])
		leases = leases[maxBatch:]
	}
	if len(leases) > 0 {
		out = append(out, leases)
	}
	return out
}

// bySlot groups leases by Cluster slot (a counting sort: linear in the
// number of leases), then chunks each slot's run.
func bySlot(leases []*Lease) [][]*Lease {
	var start [clusterSlots + 1]int32
	for _, l := range leases {
		start[l.slot+1]++
	}
	for s := 1; s <= clusterSlots; s++ {
		start[s] += start[s-1]
	}
	sorted := make([]*Lease, len(leases))
	next := start // copy: next free index per slot
	for _, l := range leases {
		sorted[next[l.slot]] = l
		next[l.slot]++
	}
	var out [][]*Lease
	for s := 0; s < clusterSlots; s++ {
		if run := sorted[start[s]:start[s+1]:start[s+1]]; len(run) > 0 {
			out = chunk(out, run)
		}
	}
	return out
}

// keySlot is the Redis Cluster slot of key: CRC16 (XMODEM) of its hash
// tag, modulo 16384, as the cluster specification defines it. go-redis
// computes the same in an internal package only.
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
	return crc % clusterSlots
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

// queueBatches queues one EVALSHA of script per batch on pipe. KEYS are
// the route keys; ARGV is head followed by each lease's route value, in
// KEYS order.
func queueBatches(ctx context.Context, pipe redis.Pipeliner, script *redis.Script, batches [][]*Lease, head ...any) []batchCall {
	calls := make([]batchCall, len(batches))
	for i, b := range batches {
		c := &calls[i]
		c.leases = b
		c.keys = make([]string, len(b))
		c.args = make([]any, len(head), len(head)+len(b))
		copy(c.args, head)
		for j, l := range b {
			c.keys[j] = l.key
			c.args = append(c.args, l.value)
		}
		c.cmd = script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	return calls
}

// requeueNoScript queues again, as EVAL, every call the server answered
// NOSCRIPT (it lost its script cache: restart, failover); EVAL caches the
// script for the next round. It reports whether it queued any.
func requeueNoScript(ctx context.Context, pipe redis.Pipeliner, script *redis.Script, calls []batchCall) bool {
	queued := false
	for i := range calls {
		if c := &calls[i]; isNoScript(c.cmd.Err()) {
			c.cmd = script.Eval(ctx, pipe, c.keys, c.args...)
			queued = true
		}
	}
	return queued
}

// decode fills each call's status or err from its reply.
func decode(calls []batchCall) {
	for i := range calls {
		c := &calls[i]
		status := make([]int8, len(c.leases))
		if c.err = decodeStatuses(c.cmd, status); c.err == nil {
			c.status = status
		}
	}
}

// decodeStatuses decodes a batch script's reply into dst, one status (1,
// 0 or -1) per key. A reply of the wrong shape fails the whole batch and
// leaves dst alone: a status is never guessed or shifted onto another
// lease.
func decodeStatuses(cmd *redis.Cmd, dst []int8) error {
	if err := cmd.Err(); err != nil {
		return err
	}
	reply, ok := cmd.Val().([]any)
	if !ok || len(reply) != len(dst) {
		return fmt.Errorf("unexpected reply %v for %d keys", cmd.Val(), len(dst))
	}
	for i, r := range reply {
		if v, ok := r.(int64); !ok || v < -1 || v > 1 {
			return fmt.Errorf("unexpected status %v for key %d of %d", r, i+1, len(dst))
		}
	}
	for i, r := range reply {
		dst[i] = int8(r.(int64))
	}
	return nil
}
