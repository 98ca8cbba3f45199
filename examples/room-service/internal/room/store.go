package room

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	rdb redis.UniversalClient
	sql *SQLSnapshots // nil: snapshots live in Redis (room:snap:{ID})
}

// append appends one command under fence. A command id already in the
// room's dedup hash (the commands after the snapshot) answers duplicate
// with its original seq and changes nothing; a stale fence answers
// ErrFenced and changes nothing. The caller checks the commands folded into
// the snapshot first.
func (s *store) append(ctx context.Context, id string, fence int64, commandID, op string) (outcome, int64, error) {
	keys := []string{RouteKey(id), cmdsKey(id), seqKey(id), logKey(id), outboxKey(id)}
	res, err := appendScript.Run(ctx, s.rdb, keys, strconv.FormatInt(fence, 10), commandID, op, id).Slice()
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
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		snap = p.HGetAll(ctx, snapKey(id))
		entries = p.XRange(ctx, logKey(id), "-", "+")
		return nil
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
