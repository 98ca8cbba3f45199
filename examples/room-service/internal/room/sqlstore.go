package room

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// SchemaVersion is the version of the MySQL schema this package creates
// and reads (the table schema_version holds the database's).
const SchemaVersion = 1

// migrations[v-1] brings a database from version v-1 to v. Each statement
// is idempotent, so replicas that start at once may all run it.
var migrations = [][]string{
	{ // 1: one row per room, the snapshot with the fence it was written under
		`CREATE TABLE IF NOT EXISTS room_snapshots (
			room_id    VARCHAR(64)  NOT NULL PRIMARY KEY,
			fence      BIGINT       NOT NULL,
			seq        BIGINT       NOT NULL,
			state      LONGTEXT     NOT NULL,
			updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
		) ENGINE=InnoDB`,
	},
}

// SQLSnapshots keeps room snapshots in MySQL (or MariaDB), one row per
// room, while the command log stays in Redis. Each row carries the fencing
// token of the lease it was written under, and a write with an older token
// than the stored one is refused by MySQL itself ([ErrFenced]): a node that
// lost a room can never overwrite the snapshot of a newer owner, however
// late its write arrives.
type SQLSnapshots struct {
	db *sql.DB
}

// NewSQLSnapshots returns snapshots stored in db. It runs nothing: call
// [SQLSnapshots.Migrate] at start.
func NewSQLSnapshots(db *sql.DB) (*SQLSnapshots, error) {
	if db == nil {
		return nil, errors.New("room: sql db is nil")
	}
	return &SQLSnapshots{db: db}, nil
}

// Migrate creates the schema, or brings it up to [SchemaVersion]. A
// database whose schema is newer than this service knows is refused with
// an error naming both versions: an older binary must not write rows it
// does not understand.
func (s *SQLSnapshots) Migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		id      TINYINT NOT NULL PRIMARY KEY,
		version INT     NOT NULL
	) ENGINE=InnoDB`); err != nil {
		return fmt.Errorf("room: create schema_version: %w", err)
	}
	var have int
	err := s.db.QueryRowContext(ctx, `SELECT version FROM schema_version WHERE id = 1`).Scan(&have)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("room: read schema_version: %w", err)
	}
	if have > SchemaVersion {
		return fmt.Errorf("room: database schema version %d is newer than this service's %d; refusing to run against it", have, SchemaVersion)
	}
	for v := have + 1; v <= SchemaVersion; v++ {
		for _, stmt := range migrations[v-1] {
			if _, err := s.db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("room: migrate schema to version %d: %w", v, err)
			}
		}
		// GREATEST: a replica that migrated further meanwhile keeps its
		// version.
		if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_version (id, version) VALUES (1, ?)
			ON DUPLICATE KEY UPDATE version = GREATEST(version, VALUES(version))`, v); err != nil {
			return fmt.Errorf("room: record schema version %d: %w", v, err)
		}
	}
	return nil
}

// put writes st as the room's snapshot under fence. MySQL applies it only
// when the stored row is not newer: its fence no higher and its seq no
// higher. A stored row with a higher fence refuses it ([ErrFenced]); one
// with the same fence and a higher seq makes it a no-op (an older snapshot
// of the same owner). The update is conditional in one statement; the
// insert of a room's first snapshot is INSERT IGNORE, so a concurrent
// first write by another owner is never overwritten either.
func (s *SQLSnapshots) put(ctx context.Context, id string, fence int64, st State) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("snapshot room %s: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE room_snapshots SET fence = ?, seq = ?, state = ?
		WHERE room_id = ? AND fence <= ? AND seq <= ?`, fence, st.Seq, data, id, fence, st.Seq)
	if err != nil {
		return fmt.Errorf("snapshot room %s to mysql: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	// No row changed: none exists, it refused the write, or it already
	// holds exactly this snapshot.
	res, err = s.db.ExecContext(ctx, `INSERT IGNORE INTO room_snapshots (room_id, fence, seq, state) VALUES (?, ?, ?, ?)`,
		id, fence, st.Seq, data)
	if err != nil {
		return fmt.Errorf("snapshot room %s to mysql: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	var stored int64
	if err := s.db.QueryRowContext(ctx, `SELECT fence FROM room_snapshots WHERE room_id = ?`, id).Scan(&stored); err != nil {
		return fmt.Errorf("snapshot room %s to mysql: %w", id, err)
	}
	if stored > fence {
		return fmt.Errorf("snapshot room %s with fence %d (mysql holds fence %d): %w", id, fence, stored, ErrFenced)
	}
	return nil
}

// get reads the room's snapshot; a room never snapshotted has none.
func (s *SQLSnapshots) get(ctx context.Context, id string) (record, error) {
	var rec record
	var data []byte
	err := s.db.QueryRowContext(ctx, `SELECT fence, seq, state FROM room_snapshots WHERE room_id = ?`, id).
		Scan(&rec.SnapshotFence, &rec.SnapshotSeq, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return record{}, nil
	}
	if err != nil {
		return record{}, fmt.Errorf("read snapshot of room %s from mysql: %w", id, err)
	}
	if err := json.Unmarshal(data, &rec.State); err != nil {
		return record{}, fmt.Errorf("decode snapshot of room %s: %w", id, err)
	}
	if rec.SnapshotSeq != rec.Seq || int64(len(rec.CommandIDs)) != rec.Seq {
		return record{}, fmt.Errorf("snapshot of room %s: seq %d disagrees with its state (seq %d, %d commands)", id, rec.SnapshotSeq, rec.Seq, len(rec.CommandIDs))
	}
	return rec, nil
}

var (
	//go:embed scripts/trim.lua
	trimLua    string
	trimScript = redis.NewScript(trimLua)
)

// snapshotSQL stores the snapshot in MySQL, then trims what it folds from
// the Redis log under the same fence. Two steps where Redis alone has one
// script, in this order, so a crash between them leaves the log untrimmed
// (recovery skips the entries the snapshot covers) and never trims what no
// snapshot holds.
func (s *store) snapshotSQL(ctx context.Context, id string, fence int64, st State) error {
	if err := s.sql.put(ctx, id, fence, st); err != nil {
		return err
	}
	keys := []string{RouteKey(id), logKey(id), cmdsKey(id)}
	res, err := trimScript.Run(ctx, s.rdb, keys, strconv.FormatInt(fence, 10), st.Seq).Text()
	if err != nil {
		return fmt.Errorf("trim %s after snapshot: %w", logKey(id), err)
	}
	if res == "fenced" {
		return fmt.Errorf("trim %s with fence %d: %w", logKey(id), fence, ErrFenced)
	}
	return nil
}

// loadSQL rebuilds a room from its MySQL snapshot and the Redis log after
// it. The log is read first: only a holder of the room trims it, and only
// up to a snapshot already in MySQL, so a snapshot read afterwards covers
// at least everything trimmed before the log was read, and no gap can open
// between the two reads whoever snapshots meanwhile.
func (s *store) loadSQL(ctx context.Context, id string) (record, error) {
	var log *redis.XMessageSliceCmd
	err := s.read(ctx, id, func(p redis.Pipeliner) { log = p.XRange(ctx, logKey(id), "-", "+") })
	if err != nil {
		return record{}, fmt.Errorf("load room %s: %w", id, err)
	}
	entries := log.Val()
	rec, err := s.sql.get(ctx, id)
	if err != nil {
		return record{}, fmt.Errorf("load room %s: %w", id, err)
	}
	if err := replay(&rec, entries); err != nil {
		return record{}, fmt.Errorf("load room %s: %w", id, err)
	}
	return rec, nil
}
