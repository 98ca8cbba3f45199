package room

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/append.lua
	appendLua    string
	appendScript = redis.NewScript(appendLua)

	//go:embed scripts/snapshot.lua
	snapshotLua    string
	snapshotScript = redis.NewScript(snapshotLua)
)

// ErrFenced means a write was refused because the room's route no longer
// carries the caller's fencing token: this node lost the room and wrote
// nothing.
var ErrFenced = errors.New("room: fenced")

// outcome is what a fenced append did.
type outcome int

const (
	applied outcome = iota + 1
	duplicate
)

// record is a room as stored in Redis: the state rebuilt from snapshot and
// log, plus where the snapshot ends and who wrote it.
type record struct {
	State
	SnapshotSeq   int64
	SnapshotFence int64
}

// store runs the room's Redis operations, and its MySQL ones when
// snapshots live there. It keeps no state: the cell (in Service) decides
// when to call it and serializes calls per room.
type store struct {
	rdb          redis.UniversalClient
	sql          *SQLSnapshots // nil: snapshots live in Redis (room:snap:{ID})
	waitReplicas int           // Config.WaitReplicas
}

// errUnreplicated says a command was applied on the primary but fewer
// replicas than Config.WaitReplicas confirmed it: a failover may yet
// discard it, so its outcome is unknown.
var errUnreplicated = errors.New("room: not confirmed by the replicas")

// checkWaitClient refuses waitReplicas on a client that cannot send WAIT
// on the connection that wrote, to the room's primary.
func checkWaitClient(rdb redis.UniversalClient, waitReplicas int) error {
	_, plain := rdb.(*redis.Client)
	_, cluster := rdb.(*redis.ClusterClient)
	if waitReplicas > 0 && !plain && !cluster {
		return fmt.Errorf("room: WaitReplicas %d needs a *redis.Client or *redis.ClusterClient, not %T", waitReplicas, rdb)
	}
	return nil
}

// defaultWaitTimeout is WAIT's longest timeout.
const defaultWaitTimeout = 500 * time.Millisecond

// append appends one command under fence. A command id already in the
// room's dedup hash (the commands after the snapshot) answers duplicate
// with its original seq and changes nothing; a stale fence answers
// ErrFenced and changes nothing. The caller checks the commands folded into
// the snapshot first.
func (s *store) append(ctx context.Context, id string, fence int64, commandID, op string) (outcome, int64, error) {
	keys := []string{RouteKey(id), cmdsKey(id), seqKey(id), logKey(id), outboxKey(id)}
	args := []any{strconv.FormatInt(fence, 10), commandID, op, id}
	var res []any
	var err error
	if s.waitReplicas == 0 {
		res, err = appendScript.Run(ctx, s.rdb, keys, args...).Slice()
	} else {
		res, err = s.appendReplicated(ctx, keys, args)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("append to %s: %w", logKey(id), err)
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("append to %s: unexpected reply %v", logKey(id), res)
	}
	kind, _ := res[0].(string)
	seq, _ := res[1].(int64)
	switch kind {
	case "applied":
		return applied, seq, nil
	case "duplicate":
		return duplicate, seq, nil
	case "fenced":
		return 0, 0, fmt.Errorf("append to %s with fence %d: %w", logKey(id), fence, ErrFenced)
	}
	return 0, 0, fmt.Errorf("append to %s: unexpected reply %v", logKey(id), res)
}

// appendReplicated runs the append script and WAIT in one pipeline to the
// room's primary: WAIT counts the writes of its own connection. Fewer
// replicas than waitReplicas in time (defaultWaitTimeout, or half the
// call's time left if less: a primary just demoted has none and never
// will, and the resend reaches the new one) is
// errUnreplicated, whatever the script answered but "fenced" (nothing
// written).
func (s *store) appendReplicated(ctx context.Context, keys []string, args []any) ([]any, error) {
	c, err := s.primaryFor(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	var timeout time.Duration
	var script, wait *redis.Cmd
	pipeline := func(eval func(p redis.Pipeliner) *redis.Cmd) error {
		timeout = s.waitTimeout(ctx) // again for the second: the first may have waited it all
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			script = eval(p)
			wait = p.Do(ctx, "WAIT", s.waitReplicas, timeout.Milliseconds())
			return nil
		})
		return err
	}
	err = pipeline(func(p redis.Pipeliner) *redis.Cmd { return appendScript.EvalSha(ctx, p, keys, args...) })
	if redis.HasErrorPrefix(script.Err(), "NOSCRIPT") {
		err = pipeline(func(p redis.Pipeliner) *redis.Cmd { return appendScript.Eval(ctx, p, keys, args...) })
	}
	res, serr := script.Slice()
	switch {
	case serr != nil:
		return nil, serr
	case len(res) > 0 && res[0] == "fenced":
		return res, nil
	case err != nil:
		return nil, s.waited(0, err, timeout)
	}
	acked, _ := wait.Int64()
	if err := s.waited(acked, nil, timeout); err != nil {
		return nil, err
	}
	return res, nil
}

// primaryFor is the client of key's primary: s.rdb, or on a Cluster the
// node serving key (New refuses other clients with WaitReplicas).
func (s *store) primaryFor(ctx context.Context, key string) (*redis.Client, error) {
	if cl, ok := s.rdb.(*redis.ClusterClient); ok {
		return cl.MasterForKey(ctx, key)
	}
	c, _ := s.rdb.(*redis.Client)
	return c, nil
}

// waited is nil if acked replicas are enough, or errUnreplicated saying why
// not: WAIT's err, or how many acknowledged within timeout.
func (s *store) waited(acked int64, err error, timeout time.Duration) error {
	switch {
	case err != nil:
		return fmt.Errorf("%w: WAIT %d: %w", errUnreplicated, s.waitReplicas, err)
	case acked < int64(s.waitReplicas):
		return fmt.Errorf("%w: %d of %d replicas within %s", errUnreplicated, acked, s.waitReplicas, timeout)
	}
	return nil
}

// snapshot writes st under fence and, in the same script, trims what it
// folds: the log entries up to st.Seq and their command ids in the dedup
// hash. A stale fence writes and trims nothing ([ErrFenced]). A snapshot
// older than the stored one is ignored: it would only undo trimming that
// already happened.
func (s *store) snapshot(ctx context.Context, id string, fence int64, st State) error {
	if s.sql != nil {
		return s.snapshotSQL(ctx, id, fence, st)
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", snapKey(id), err)
	}
	keys := []string{RouteKey(id), snapKey(id), logKey(id), cmdsKey(id)}
	res, err := snapshotScript.Run(ctx, s.rdb, keys, strconv.FormatInt(fence, 10), st.Seq, data).Text()
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", snapKey(id), err)
	}
	switch res {
	case "ok", "stale":
		return nil
	case "fenced":
		return fmt.Errorf("snapshot %s with fence %d: %w", snapKey(id), fence, ErrFenced)
	}
	return fmt.Errorf("snapshot %s: unexpected reply %q", snapKey(id), res)
}

// load rebuilds a room from its snapshot and the log entries after it. Both
// are read in one MULTI (one slot), so a snapshot that trims the log between
// the two reads cannot open a gap; entries the snapshot covers are skipped.
func (s *store) load(ctx context.Context, id string) (record, error) {
	if s.sql != nil {
		return s.loadSQL(ctx, id)
	}
	var snap *redis.MapStringStringCmd
	var entries *redis.XMessageSliceCmd
	err := s.read(ctx, id, func(p redis.Pipeliner) {
		snap = p.HGetAll(ctx, snapKey(id))
		entries = p.XRange(ctx, logKey(id), "-", "+")
	})
	if err != nil {
		return record{}, fmt.Errorf("load room %s: %w", id, err)
	}
	rec, err := decodeSnapshot(snap.Val())
	if err != nil {
		return record{}, fmt.Errorf("load room %s: %w", id, err)
	}
	if err := replay(&rec, entries.Val()); err != nil {
		return record{}, fmt.Errorf("load room %s: %w", id, err)
	}
	return rec, nil
}

// read runs reads in one MULTI. With waitReplicas it is the MULTI of
// [store.confirmed]: a room loaded from a primary that a failover is about
// to discard would otherwise answer a resend from what it loaded
// (Service.Apply's seqOf) with nothing confirmed.
func (s *store) read(ctx context.Context, id string, reads func(p redis.Pipeliner)) error {
	if s.waitReplicas == 0 {
		_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			reads(p)
			return nil
		})
		return err
	}
	return s.confirmed(ctx, id, reads)
}

// confirmed runs reads in one MULTI on a connection of its own to the
// room's primary, with a write that replicates (the room's seq counter
// raised by 0, if it exists), then WAIT on that connection: what was read
// is on waitReplicas replicas, or the error matches errUnreplicated.
func (s *store) confirmed(ctx context.Context, id string, reads func(p redis.Pipeliner)) error {
	client, err := s.primaryFor(ctx, seqKey(id))
	if err != nil {
		return err
	}
	conn := client.Conn()
	defer conn.Close()
	var touched *redis.Cmd
	_, err = conn.TxPipelined(ctx, func(p redis.Pipeliner) error {
		reads(p)
		touched = p.Eval(ctx, touchLua, []string{seqKey(id)})
		return nil
	})
	if err != nil {
		return err
	}
	if n, _ := touched.Int64(); n == 0 {
		return nil // a room never written: nothing to confirm
	}
	timeout := s.waitTimeout(ctx)
	acked, err := conn.Wait(ctx, s.waitReplicas, timeout).Result()
	return s.waited(acked, err, timeout)
}

// touchLua writes KEYS[1], a room's seq counter, unchanged, if it exists,
// and says whether it did: INCRBY 0 replicates, so a WAIT after it covers
// every earlier write. A room without one was never written: nothing to
// confirm, and it gets no key.
const touchLua = `if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end redis.call("INCRBY", KEYS[1], 0) return 1`

// waitTimeout is WAIT's timeout: defaultWaitTimeout, or half of ctx's time
// left, or half the client's ReadTimeout, if less (a pipeline's reply is
// read within ReadTimeout: a longer WAIT would end as an i/o timeout and a
// closed connection). 0 would wait for ever.
func (s *store) waitTimeout(ctx context.Context) time.Duration {
	timeout := defaultWaitTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d)/2)
	}
	var read time.Duration
	switch c := s.rdb.(type) {
	case *redis.Client:
		read = c.Options().ReadTimeout
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	}
	if read > 0 {
		timeout = min(timeout, read/2)
	}
	return max(timeout, time.Millisecond)
}

// replay applies the log entries after rec's snapshot.
func replay(rec *record, entries []redis.XMessage) error {
	for _, e := range entries {
		seq, err := entrySeq(e.ID)
		if err != nil {
			return err
		}
		if seq <= rec.Seq {
			continue
		}
		cmd, _ := e.Values["cmd"].(string)
		if err := rec.apply(seq, cmd); err != nil {
			return err
		}
	}
	return nil
}

func decodeSnapshot(h map[string]string) (record, error) {
	var rec record
	if len(h) == 0 {
		return rec, nil
	}
	if err := json.Unmarshal([]byte(h["state"]), &rec.State); err != nil {
		return rec, fmt.Errorf("decode snapshot state: %w", err)
	}
	var err error
	if rec.SnapshotSeq, err = strconv.ParseInt(h["seq"], 10, 64); err != nil {
		return rec, fmt.Errorf("decode snapshot seq %q: %w", h["seq"], err)
	}
	if rec.SnapshotFence, err = strconv.ParseInt(h["fence"], 10, 64); err != nil {
		return rec, fmt.Errorf("decode snapshot fence %q: %w", h["fence"], err)
	}
	if rec.SnapshotSeq != rec.Seq || int64(len(rec.CommandIDs)) != rec.Seq {
		return rec, fmt.Errorf("snapshot seq %d disagrees with its state (seq %d, %d commands)", rec.SnapshotSeq, rec.Seq, len(rec.CommandIDs))
	}
	return rec, nil
}

// entrySeq reads the seq from a log entry id "<seq>-1".
func entrySeq(id string) (int64, error) {
	ms, _, ok := strings.Cut(id, "-")
	seq, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return 0, fmt.Errorf("log entry id %q is not <seq>-1", id)
	}
	return seq, nil
}
