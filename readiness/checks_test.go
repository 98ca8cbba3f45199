package readiness_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// runCheck runs one ready-made check the way an evaluation does.
func runCheck(t *testing.T, c readiness.Check) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), c.Timeout)
	defer cancel()
	return c.Probe(ctx)
}

func TestReadyMadeCheckDefaults(t *testing.T) {
	tests := []struct {
		give        readiness.Check
		wantName    string
		wantTimeout time.Duration
	}{
		{readiness.RedisPing(nil), "redis", 200 * time.Millisecond},
		{readiness.SQLPing(&sql.DB{}), "sql", 300 * time.Millisecond},
		{readiness.GRPCHealth(nil, "room-service"), "room-service", 300 * time.Millisecond},
		{readiness.Listener(":8080"), "listener :8080", 100 * time.Millisecond},
	}
	for _, tt := range tests {
		if tt.give.Name != tt.wantName || tt.give.Timeout != tt.wantTimeout || tt.give.Tier != readiness.Gating {
			t.Errorf("got %s %v %v; want %s %v gating", tt.give.Name, tt.give.Timeout, tt.give.Tier, tt.wantName, tt.wantTimeout)
		}
	}
}

func TestRedisPing(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	c := readiness.RedisPing(client)
	if err := runCheck(t, c); err != nil {
		t.Fatalf("PING a running redis-server: %v; want nil", err)
	}
	srv.Kill()
	if err := runCheck(t, c); err == nil {
		t.Errorf("PING a killed redis-server: nil; want an error")
	}
}

func TestListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	if err := runCheck(t, readiness.Listener(addr)); err != nil {
		t.Errorf("open listener: %v; want nil", err)
	}
	<-accepted
	ln.Close()
	if err := runCheck(t, readiness.Listener(addr)); err == nil {
		t.Errorf("closed listener: nil; want an error")
	}
}

// No SQL server is part of this project, so the SQL check runs against a
// minimal database/sql driver written here: it exercises the real
// database/sql pool and PingContext path, which is all SQLPing uses.
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

func init() { sql.Register("readiness-ping", pingDrv) }

func TestSQLPing(t *testing.T) {
	db, err := sql.Open("readiness-ping", "app:s3cret@tcp(db:3306)/rooms")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := newRegistry(t, newState(lifecycle.Running), nil)
	mustAdd(t, r, readiness.SQLPing(db))
	if rep := r.Ready(t.Context()); rep.Status != readiness.StatusOK {
		t.Fatalf("database up: got %s %v; want ok", rep.Status, rep.Checks)
	}
	pingDrv.down.Store(true)
	defer pingDrv.down.Store(false)
	if err := runCheck(t, readiness.SQLPing(db)); err == nil {
		t.Errorf("database down: %v; want an error", err)
	}
}
