package sqlcheck_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/sqlcheck"
)

func TestPingDefaults(t *testing.T) {
	c := sqlcheck.Ping(&sql.DB{})
	assert.Equal(t, "sql", c.Name)
	assert.Equal(t, 300*time.Millisecond, c.Timeout)
	assert.Equal(t, readiness.Gating, c.Tier)
}

// pingDriver is a minimal database/sql driver: it exercises the real
// database/sql pool and PingContext path, which is all Ping uses, and
// fails the way a driver does, with the DSN's password in the error.
type pingDriver struct{ down atomic.Bool }

func (d *pingDriver) Open(string) (driver.Conn, error) {
	if d.down.Load() {
		return nil, errors.New("dial app:s3cret@tcp(db:3306)/rooms: connection refused")
	}
	return &pingConn{d}, nil
}

type pingConn struct{ d *pingDriver }

func (c *pingConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not supported") }
func (c *pingConn) Close() error                        { return nil }
func (c *pingConn) Begin() (driver.Tx, error)           { return nil, errors.New("not supported") }
func (c *pingConn) Ping(ctx context.Context) error {
	if c.d.down.Load() {
		return driver.ErrBadConn
	}
	return ctx.Err()
}

var pingDrv = &pingDriver{}

func init() { sql.Register("sqlcheck-ping", pingDrv) }

type running struct{}

func (running) State() lifecycle.State { return lifecycle.Running }

func TestPing(t *testing.T) {
	db, err := sql.Open("sqlcheck-ping", "app:s3cret@tcp(db:3306)/rooms")
	require.NoError(t, err)
	defer db.Close()
	// CacheTTL: the second probe must run the check again, not reuse the first.
	r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1",
		CacheTTL: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)}, running{}.State)
	require.NoError(t, err)
	defer r.Close(context.Background())
	require.NoError(t, r.Add(sqlcheck.Ping(db)))
	rep := r.Ready(t.Context())
	require.Equal(t, readiness.StatusOK, rep.Status, "database up (checks %v)", rep.Checks)

	pingDrv.down.Store(true)
	defer pingDrv.down.Store(false)
	db.SetMaxIdleConns(0) // the next ping must open a connection, and fail to
	rep = r.Ready(t.Context())
	require.Equal(t, readiness.StatusFail, rep.Status, "database down (checks %v)", rep.Checks)
	require.Len(t, rep.Checks, 1, "database down")
	msg := rep.Checks[0].Message
	assert.NotEmpty(t, msg, "database down: message; want the driver's error")
	assert.NotContains(t, msg, "s3cret", "database down: message; want an error without the password")
}
