package room

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// A snapshot write holds its room. With the snapshot table locked, the
// write waits in MySQL; a command for the same room must not wait behind
// it for the whole turn, only for the write's own budget. (The incident: a
// drain's in-flight commands waited behind a 5 s turn for the whole
// wait_in_flight budget, so the flush, which guards the rooms, never ran.)
func TestCommandNotHeldBehindBlockedSnapshotWrite(t *testing.T) {
	rdb := startRedis(t)
	snaps, db := startSnapshots(t)
	a := newSQLNode(t, rdb, snaps, "a")
	a.svc.cfg.SnapshotWriteTimeout = 200 * time.Millisecond
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)

	ctx := context.Background()
	conn, err := db.Conn(ctx) // LOCK TABLES holds for the session
	require.NoError(t, err, "db.Conn")
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "LOCK TABLES room_snapshots WRITE")
	require.NoError(t, err, "LOCK TABLES room_snapshots WRITE")
	// A turn far longer than the budget a drain leaves its in-flight
	// commands (the default turn is 5 s; a drain's wait_in_flight often
	// gets 3 s).
	turn, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	snapped := make(chan error, 1)
	go func() { snapped <- a.svc.SnapshotAll(turn) }()
	awaitBlockedSnapshotWrite(t, db)

	// The command's deadline stands for what a drain gives it.
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	defer ccancel()
	resp, err := apply(cctx, a.svc, "r1", "c2")
	if assert.NoError(t, err, "Apply behind a blocked snapshot write: want APPLIED once the write's budget ran out") {
		assert.Equal(t, roompb.ApplyResponse_APPLIED, resp.GetStatus(), "Apply behind a blocked snapshot write: status (response %v)", resp)
	}
	assert.ErrorIs(t, <-snapped, context.DeadlineExceeded, "SnapshotAll with the table locked: want the write's deadline exceeded")

	_, err = conn.ExecContext(ctx, "UNLOCK TABLES")
	require.NoError(t, err, "UNLOCK TABLES")
	require.NoError(t, a.svc.SnapshotAll(ctx), "SnapshotAll after the unlock")
	require.Equal(t, int64(2), getRoom(t, a.svc, "r1").GetSnapshotSeq(), "snapshot seq after the next turn")
}

// awaitBlockedSnapshotWrite waits until MariaDB shows a snapshot write
// waiting for the table lock: only then does the snapshot hold the room.
func awaitBlockedSnapshotWrite(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond) // polling another process's state
	defer tick.Stop()
	for {
		var n int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE INFO LIKE '%room_snapshots%' AND STATE LIKE '%lock%'`).Scan(&n)
		if err == nil && n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			require.FailNowf(t, "no snapshot write waiting for the table lock", "%v", errors.Join(err, ctx.Err()))
		case <-tick.C:
		}
	}
}

func TestConfigValidateNamesField(t *testing.T) {
	ok := Config{ErrHeld: errHeld, ErrDraining: errDraining}
	tests := []struct {
		name string
		give func(*Config)
		want string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"negative interval", func(c *Config) { c.SnapshotInterval = -time.Second }, "SnapshotInterval -1s is negative"},
		{"negative turn", func(c *Config) { c.SnapshotTurn = -time.Second }, "SnapshotTurn -1s is negative"},
		{"negative write timeout", func(c *Config) { c.SnapshotWriteTimeout = -time.Millisecond }, "SnapshotWriteTimeout -1ms is negative"},
		{"no held error", func(c *Config) { c.ErrHeld = nil }, "ErrHeld is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.give(&c)
			err := c.Validate()
			if tt.want == "" {
				require.NoError(t, err, "Validate()")
			} else {
				require.ErrorContains(t, err, tt.want, "Validate()")
			}
		})
	}
}
