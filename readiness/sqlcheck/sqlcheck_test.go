package sqlcheck_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/sqlcheck"
)

func TestPingDefaults(t *testing.T) {
	c := sqlcheck.Ping(&sql.DB{})
	if c.Name != "sql" || c.Timeout != 300*time.Millisecond || c.Tier != readiness.Gating {
		t.Errorf("got %s %v %v; want sql 300ms gating", c.Name, c.Timeout, c.Tier)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// CacheTTL: the second probe must run the check again, not reuse the first.
	r, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1",
		CacheTTL: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)}, running{}.State)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if err := r.Add(sqlcheck.Ping(db)); err != nil {
		t.Fatal(err)
	}
	if rep := r.Ready(t.Context()); rep.Status != readiness.StatusOK {
		t.Fatalf("database up: got %s %v; want ok", rep.Status, rep.Checks)
	}

	pingDrv.down.Store(true)
	defer pingDrv.down.Store(false)
	db.SetMaxIdleConns(0) // the next ping must open a connection, and fail to
	rep := r.Ready(t.Context())
	if rep.Status != readiness.StatusFail || len(rep.Checks) != 1 {
		t.Fatalf("database down: got %s %v; want fail", rep.Status, rep.Checks)
	}
	if msg := rep.Checks[0].Message; msg == "" || strings.Contains(msg, "s3cret") {
		t.Errorf("database down: message %q; want an error without the password", msg)
	}
}
