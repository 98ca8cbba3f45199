package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/proctest"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/mariadbtest"
	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/lifecycle"
)

func TestSQLFromEnv(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		wantErr   string // substring; empty: no error
		wantShown string // the redacted primary DSN
	}{
		{name: "none", env: map[string]string{}},
		{name: "primary", env: map[string]string{"MYSQL_DSN": "app:s3cret@tcp(db:3306)/rooms"},
			wantShown: "app:***@tcp(db:3306)/rooms?timeout=3s"},
		{name: "bad primary", env: map[string]string{"MYSQL_DSN": "app:s3cret@db:3306/rooms"},
			wantErr: `MYSQL_DSN="app:***@db:3306/rooms"`},
		{name: "bad analytics", env: map[string]string{"ANALYTICS_DSN": "app:s3cret@tcp(db:3306)/a?timeout=abc"},
			wantErr: "ANALYTICS_DSN"},
		{name: "pool size not a number", env: map[string]string{"MYSQL_MAX_OPEN_CONNS": "many"},
			wantErr: `MYSQL_MAX_OPEN_CONNS="many"`},
		{name: "pool size zero", env: map[string]string{"MYSQL_MAX_OPEN_CONNS": "0"},
			wantErr: `MYSQL_MAX_OPEN_CONNS="0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sqlFromEnv(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				var ce *configError
				require.ErrorAs(t, err, &ce)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.NotContains(t, err.Error(), "s3cret")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantShown, got.Primary.redacted)
		})
	}
}

// Polling bounds: probes answer within HEALTH_READY_TIMEOUT; the process
// reports a change at the first probe after it.
const (
	waitFor   = 10 * time.Second
	pollEvery = 50 * time.Millisecond
)

// readyBody is /healthz/ready?verbose=1 decoded.
type readyBody struct {
	Status string `json:"status"`
	Checks []struct {
		Name, Tier, Status, Message string
	} `json:"checks"`
}

func (n *node) readyVerbose(t *testing.T) (int, readyBody, string) {
	t.Helper()
	resp, err := http.Get("http://" + n.admin + "/healthz/ready?verbose=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var b readyBody
	require.NoError(t, json.Unmarshal(raw, &b), string(raw))
	return resp.StatusCode, b, string(raw)
}

func (n *node) live(t *testing.T) int {
	t.Helper()
	resp, err := http.Get("http://" + n.admin + "/healthz/live")
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// The guide's readiness list for room-service, check by check, with the
// snapshots in MySQL and an analytics database that is down.
func TestReadyListsEveryCheckWithMySQL(t *testing.T) {
	rs := redistest.Start(t)
	db := mariadbtest.Start(t)
	down := fmt.Sprintf("app:s3cret@tcp(127.0.0.1:%d)/analytics", redistest.FreePort(t)) // nothing listens
	n := startNode(t, rs.URL(), "node-a", "MYSQL_DSN="+db.DSN, "ANALYTICS_DSN="+down)
	assert.Contains(t, n.Output(), `"msg":"room snapshots in mysql"`)

	// The first answer with every gating check ok (the 100 ms listener
	// self-check may time out on a loaded machine now and then).
	var code int
	var b readyBody
	var raw string
	require.Eventually(t, func() bool {
		code, b, raw = n.readyVerbose(t)
		return code == http.StatusOK
	}, waitFor, pollEvery)
	assert.Equal(t, "degraded", b.Status, raw)
	want := map[string]string{ // name -> tier
		"mysql": "gating", "redis": "gating", "redis_lease": "gating", "grpc_listener": "gating", "analytics": "informational",
	}
	got := map[string]string{}
	for _, c := range b.Checks {
		got[c.Name] = c.Tier
		switch c.Name {
		case "analytics":
			assert.Equal(t, "fail", c.Status, "analytics is down")
			assert.NotEmpty(t, c.Message)
		default:
			assert.Equal(t, "ok", c.Status, "%s: %s", c.Name, c.Message)
		}
	}
	assert.Equal(t, want, got, raw)
	assert.NotContains(t, raw, "s3cret")
	assert.NotContains(t, raw, mariadbtest.Password)
	assert.NotContains(t, n.Output(), mariadbtest.Password, "no password in the log")

	// MySQL stops: not ready, naming mysql; liveness stays 200.
	db.Stop()
	require.Eventually(t, func() bool {
		code, _, _ := n.readyVerbose(t)
		return code == http.StatusServiceUnavailable
	}, waitFor, pollEvery)
	_, b, raw = n.readyVerbose(t)
	failed := []string{}
	for _, c := range b.Checks {
		if c.Status == "fail" && c.Tier == "gating" {
			failed = append(failed, c.Name)
		}
	}
	assert.Contains(t, failed, "mysql", raw)
	assert.Equal(t, http.StatusOK, n.live(t), "liveness never checks a dependency")
	n.Await(t, `"failed_check":"mysql`) // the transition log names it first
	assert.NotContains(t, n.Output(), "[mysql]", "the driver logs as JSON")

	db.Start()
	require.Eventually(t, func() bool { return n.ready(t) == http.StatusOK }, waitFor, pollEvery)
	n.Signal(t, syscall.SIGTERM)
	assert.Equal(t, 0, n.ExitCode(t), n.Output())
}

// A drain writes each room's snapshot to MySQL before releasing its lease;
// the next owner recovers from it plus the log; a database whose schema is
// newer than the service is refused at start.
func TestDrainFlushesToMySQL(t *testing.T) {
	rs := redistest.Start(t)
	db := mariadbtest.Start(t)
	ctx := context.Background()
	a := startNode(t, rs.URL(), "node-a", "MYSQL_DSN="+db.DSN)
	ca := a.client(t)
	for j := range 3 {
		resp, err := ca.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: fmt.Sprintf("c%d", j), Op: "join"})
		require.NoError(t, err)
		require.Equal(t, roompb.ApplyResponse_APPLIED, resp.Status)
	}
	a.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, a.ExitCode(t), a.Output())

	var seq, fence int64
	sqlDB := db.DB()
	require.NoError(t, sqlDB.QueryRowContext(ctx, "SELECT seq, fence FROM room_snapshots WHERE room_id = 'r1'").Scan(&seq, &fence))
	assert.EqualValues(t, 3, seq, "the drain flushed r1 to mysql")
	n, err := rs.Client().XLen(ctx, "room:log:{r1}").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the flush trimmed what mysql holds")

	b := startNode(t, rs.URL(), "node-b", "MYSQL_DSN="+db.DSN)
	resp, err := b.client(t).Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "c3", Op: "join"})
	require.NoError(t, err)
	assert.EqualValues(t, 4, resp.Seq, "recovered from the mysql snapshot")
	b.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, b.ExitCode(t), b.Output())

	_, err = sqlDB.ExecContext(ctx, "UPDATE schema_version SET version = 99")
	require.NoError(t, err)
	c := proctest.Start(t, "node-c", proctest.Build(t, "."), "NODE_ID=node-c", "REDIS_URL="+rs.URL(), "MYSQL_DSN="+db.DSN,
		fmt.Sprintf("GRPC_ADDR=127.0.0.1:%d", redistest.FreePort(t)), fmt.Sprintf("ADMIN_ADDR=127.0.0.1:%d", redistest.FreePort(t)))
	assert.Equal(t, lifecycle.ExitStartFailed, c.ExitCode(t), c.Output())
	assert.Contains(t, c.Output(), "schema version 99 is newer than this service's 1")
	assert.NotContains(t, c.Output(), mariadbtest.Password)
	assert.True(t, strings.Contains(c.Output(), "MYSQL_DSN="), "the error names the variable")
}

// With the snapshot table locked, every flush blocks: the flush hook must
// give up at its own budget, so that the release and close phases still run
// (the node's heartbeat deleted, the clients closed) and the drain ends
// before DRAIN_TIMEOUT. The unflushed rooms are left to expire, not
// released.
func TestDrainWithSnapshotsLockedStillReleasesAndCloses(t *testing.T) {
	rs := redistest.Start(t)
	db := mariadbtest.Start(t)
	ctx := context.Background()
	a := startNode(t, rs.URL(), "node-a", "MYSQL_DSN="+db.DSN, "DRAIN_TIMEOUT=4s")
	ca := a.client(t)
	rooms := []string{"r1", "r2", "r3"}
	apply := func(cmd string) {
		for _, id := range rooms {
			resp, err := ca.Apply(ctx, &roompb.ApplyRequest{RoomId: id, CommandId: id + "-" + cmd, Op: "join"})
			require.NoError(t, err)
			require.Equal(t, roompb.ApplyResponse_APPLIED, resp.Status, "room %s command %s", id, cmd)
		}
	}
	apply("c0") // loads each room (a read of room_snapshots) before the lock

	conn, err := db.DB().Conn(ctx) // LOCK TABLES holds for the session
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "LOCK TABLES room_snapshots WRITE")
	require.NoError(t, err)
	apply("c1") // Redis only: every room has a change no snapshot holds

	a.Signal(t, syscall.SIGTERM)
	code := a.ExitCode(t)
	rep := drainReport(t, a.Output())
	assert.False(t, rep.DeadlineExceeded, "the drain ran out of DRAIN_TIMEOUT")
	assert.Equal(t, lifecycle.ExitHookFailed, code, "a flush that gave up is a failed hook, not the deadline\n%s", a.Output())
	phases := map[string]bool{}
	for _, h := range rep.Hooks {
		switch {
		case strings.HasPrefix(h.Name, "lease-handoff"):
			assert.NotEqual(t, "ok", h.Outcome, "the hand-off cannot have flushed a locked table")
		case h.Phase == "release" || h.Phase == "close":
			phases[h.Phase] = true
			assert.Equal(t, "ok", h.Outcome, "hook %s (%s): %s", h.Name, h.Phase, h.Error)
		}
	}
	assert.Equal(t, map[string]bool{"release": true, "close": true}, phases, "hooks of the release and close phases in the report")

	n, err := rs.Client().Exists(ctx, "room:node:{node-a}").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the release phase ended the lease session")
	n, err = rs.Client().Exists(ctx, "room:route:{r1}", "room:route:{r2}", "room:route:{r3}").Result()
	require.NoError(t, err)
	assert.EqualValues(t, len(rooms), n, "unflushed rooms are not released one by one (they move with the session's end)")
}

// drainHook is one hook of a drain report line.
type drainHook struct {
	Name, Phase, Outcome, Error string
}

// drainReportLine is the report of a "drain report" log line.
type drainReportLine struct {
	DeadlineExceeded bool `json:"deadline_exceeded"`
	Hooks            []drainHook
}

// drainReport reads the report of the drain report line in out.
func drainReport(t *testing.T, out string) drainReportLine {
	t.Helper()
	for line := range strings.Lines(out) {
		var e struct {
			Msg    string
			Report drainReportLine
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "drain report" {
			return e.Report
		}
	}
	t.Fatalf("no drain report line:\n%s", out)
	return drainReportLine{}
}
