package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/drainkit/drainkit/examples/internal/proctest"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/redistest"
)

// node is one room-service process under test.
type node struct {
	*proctest.Proc
	grpc, admin string
}

func startNode(t *testing.T, redisURL, id string, env ...string) *node {
	t.Helper()
	n := &node{
		grpc:  fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)),
		admin: fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)),
	}
	n.Proc = proctest.Start(t, id, proctest.Build(t, "."), append([]string{
		"NODE_ID=" + id, "REDIS_URL=" + redisURL, "GRPC_ADDR=" + n.grpc, "ADMIN_ADDR=" + n.admin,
		"DRAIN_DELAY=300ms", "DRAIN_TIMEOUT=10s", "LEASE_TTL=2s",
		// Rooms stay where a test put them unless it turns balancing on
		// (the last of a variable's values wins).
		"BALANCE_INTERVAL=0",
	}, env...)...)
	n.Await(t, `"new_status":"running"`)
	return n
}

func (n *node) ready(t *testing.T) int {
	t.Helper()
	resp, err := http.Get("http://" + n.admin + "/healthz/ready")
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func (n *node) client(t *testing.T) roompb.RoomsClient {
	t.Helper()
	conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return roompb.NewRoomsClient(conn)
}

func TestDrainHandsRoomsOver(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	a := startNode(t, rs.URL(), "node-a")
	assert.Equal(t, http.StatusOK, a.ready(t))
	ca := a.client(t)
	rooms := []string{"r1", "r2", "r3"}
	for i, id := range rooms {
		for j := range 3 {
			resp, err := ca.Apply(ctx, &roompb.ApplyRequest{RoomId: id, CommandId: fmt.Sprintf("%s-c%d", id, j), Op: "join"})
			require.NoError(t, err)
			require.Equal(t, roompb.ApplyResponse_APPLIED, resp.Status, "room %d command %d", i, j)
		}
	}
	before, err := ca.GetRoom(ctx, &roompb.GetRoomRequest{RoomId: "r1"})
	require.NoError(t, err)

	a.Signal(t, syscall.SIGTERM)
	a.Await(t, `"new_status":"draining"`)
	assert.Equal(t, http.StatusServiceUnavailable, a.ready(t), "ready fails on the first probe after the flip")
	assert.Equal(t, 0, a.ExitCode(t), a.Output())

	out := a.Output()
	order := []string{`"phase":"stop_intake","hooks"`, `"phase":"wait_in_flight","hooks"`, `"phase":"flush","hooks"`, `"phase":"release","hooks"`, `"phase":"close","hooks"`}
	last := -1
	for _, s := range order {
		i := strings.Index(out, s)
		require.Greater(t, i, last, "phase %s out of order", s)
		last = i
	}
	assert.Contains(t, out, `"released":3`)
	assert.Equal(t, 3, strings.Count(out, `"event":"acquired"`), "one audit line per acquisition")
	assert.Equal(t, 3, strings.Count(out, `"event":"ended"`), "one audit line per hand-over")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"msg":"`) && !strings.Contains(line, `"service":"`) { // lifecycle's and readiness's have it
			t.Errorf("a line without the service, which an operator filters by: %s", line)
		}
		if strings.Contains(line, `"msg":"lease `) || strings.Contains(line, `"msg":"room `) {
			assert.Contains(t, line, `"service":"room-service"`, "an operator filters by service")
			assert.Contains(t, line, `"node_id":"node-a"`, "one stream holds every node's lines")
		}
	}
	n, err := rs.Client().Exists(ctx, "room:route:{r1}", "room:route:{r2}", "room:route:{r3}", "room:node:{node-a}").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "every room was handed over and the lease session ended")
	assert.Contains(t, out, `"name":"outbox.publish_left","phase":"release","outcome":"ok"`, "what the outbox left is published after the hand-off")
	n, err = rs.Client().Exists(ctx, "room:outbox:{r1}", "room:outbox:{r2}", "room:outbox:{r3}").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "every event published")

	// The next owner recovers each room from snapshot and log.
	b := startNode(t, rs.URL(), "node-b")
	cb := b.client(t)
	resp, err := cb.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "r1-c0", Op: "join"})
	require.NoError(t, err)
	assert.Equal(t, roompb.ApplyResponse_APPLIED, resp.Status, "a resent command gets its first answer")
	assert.Equal(t, int64(1), resp.Seq, "a resent command keeps the seq of its first application")
	resp, err = cb.Apply(ctx, &roompb.ApplyRequest{RoomId: "r1", CommandId: "r1-c3", Op: "join"})
	require.NoError(t, err)
	require.Equal(t, roompb.ApplyResponse_APPLIED, resp.Status)
	after, err := cb.GetRoom(ctx, &roompb.GetRoomRequest{RoomId: "r1"})
	require.NoError(t, err)
	assert.Equal(t, append(before.CommandIds, "r1-c3"), after.CommandIds)
	assert.Greater(t, after.Fence, before.Fence, "the new owner writes with a higher fence")
	b.Signal(t, syscall.SIGTERM)
	assert.Equal(t, 0, b.ExitCode(t), b.Output())
}

func TestRedirectToOwner(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	a := startNode(t, rs.URL(), "node-a")
	b := startNode(t, rs.URL(), "node-b")
	_, err := a.client(t).Apply(ctx, &roompb.ApplyRequest{RoomId: "r9", CommandId: "c1", Op: "join"})
	require.NoError(t, err)
	resp, err := b.client(t).Apply(ctx, &roompb.ApplyRequest{RoomId: "r9", CommandId: "c2", Op: "join"})
	require.NoError(t, err)
	assert.Equal(t, roompb.ApplyResponse_REDIRECT, resp.Status)
	assert.Equal(t, "node-a", resp.OwnerNode)
	assert.Equal(t, a.grpc, resp.OwnerAddr, "the redirect carries an address the client can dial")
}

func TestRefusesToStart(t *testing.T) {
	const password = "hunter2-s3cret"
	rs := redistest.StartAuth(t, "app", password)
	dead := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	sen := redistest.StartSentinel(t)
	bin := proctest.Build(t, ".") // one build for every case
	tests := []struct {
		name     string
		env      []string
		wantCode int
		wantText []string
	}{
		{"drain timeout not a duration", []string{"DRAIN_TIMEOUT=abc"}, 78, []string{`DRAIN_TIMEOUT=\"abc\"`}},
		{"delay longer than timeout", []string{"DRAIN_TIMEOUT=5s", "DRAIN_DELAY=8s"}, 78, []string{`DRAIN_DELAY=\"8s\": must be shorter than DRAIN_TIMEOUT (5s)`}},
		{"lease ttl too short", []string{"LEASE_TTL=100ms"}, 78, []string{`LEASE_TTL=\"100ms\"`}},
		{"balance interval too short", []string{"BALANCE_INTERVAL=10ms"}, 78, []string{`BALANCE_INTERVAL=\"10ms\"`, "want 0 (off) or a duration of at least 100ms"}},
		{"balance interval not a duration", []string{"BALANCE_INTERVAL=often"}, 78, []string{`BALANCE_INTERVAL=\"often\"`}},
		{"snapshot interval too short", []string{"SNAPSHOT_INTERVAL=10ms"}, 78, []string{`SNAPSHOT_INTERVAL=\"10ms\"`, "want a duration of at least 100ms"}},
		{"redis unreachable", []string{"REDIS_URL=redis://app:" + password + "@" + dead},
			5, []string{`REDIS_URL=\"redis://app:***@` + dead + `\": PING failed`, "connection refused", `"component":"go-redis"`}},
		{"wrong password", []string{"REDIS_URL=redis://app:wrong-" + password + "@" + rs.Addr},
			5, []string{`REDIS_URL=\"redis://app:***@` + rs.Addr + `\": PING failed`, "WRONGPASS"}},
		{"no password", []string{"REDIS_URL=redis://" + rs.Addr}, 5, []string{"NOAUTH"}},
		// net/url would read the / as the end of the host and quote
		// ":hunter2-s3" as a bad port: a piece of the password.
		{"malformed url", []string{"REDIS_URL=redis://app:" + password[:10] + "/" + password[10:] + "@" + rs.Addr},
			78, []string{`REDIS_URL=\"redis://app:***@` + rs.Addr + `\": not a URL`}},
		{"scheme left out", []string{"REDIS_URL=app:" + password + "@" + rs.Addr},
			78, []string{`REDIS_URL=\"app:***@` + rs.Addr + `\"`, "invalid URL scheme"}},
		{"bad option", []string{"REDIS_URL=redis://app:" + password + "@" + rs.Addr + "/0?dial_timeout=soon"},
			78, []string{`REDIS_URL=\"redis://app:***@` + rs.Addr + `/0?dial_timeout=soon\"`, "invalid dial_timeout"}},
		{"more retries than leases allow", []string{"REDIS_URL=" + rs.URL() + "?max_retries=3"}, 78, []string{"max_retries=3"}},
		{"sentinel without master name", []string{"REDIS_URL=", "REDIS_SENTINEL_URL=redis://" + rs.Addr + "?password=" + password},
			78, []string{`REDIS_SENTINEL_URL=\"redis://` + rs.Addr + `?password=***\"`, "master_name"}},
		// go-redis calls the sentinels unreachable.
		{"master no sentinel monitors", []string{"REDIS_URL=", "REDIS_SENTINEL_URL=redis://" + sen.Sentinel.Addr + "?master_name=typo"},
			5, []string{"name no master of master_name (misspelled, or not monitored yet)"}},
		{"two topologies", []string{"REDIS_CLUSTER_URL=" + rs.URL()}, 78, []string{`REDIS_CLUSTER_URL=\"redis://app:***@`, "REDIS_URL is set too"}},
		{"old REDIS_ADDR", []string{"REDIS_ADDR=" + rs.Addr}, 78, []string{`REDIS_ADDR=\"` + rs.Addr + `\": no longer read: set REDIS_URL=redis://` + rs.Addr}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{"NODE_ID=n", "REDIS_URL=" + rs.URL(),
				fmt.Sprintf("GRPC_ADDR=127.0.0.1:%d", redistest.FreePort(t)),
				fmt.Sprintf("ADMIN_ADDR=127.0.0.1:%d", redistest.FreePort(t))}, tt.env...)
			p := proctest.Start(t, tt.name, bin, env...)
			if got := p.ExitCode(t); got != tt.wantCode {
				t.Errorf("exit code %d; want %d\n%s", got, tt.wantCode, p.Output())
			}
			out := p.Output()
			for _, want := range tt.wantText {
				assert.Contains(t, out, want)
			}
			assertNoPassword(t, out, password)
			assertJSONLines(t, out)
		})
	}
}

// TestPasswordProtectedRedis: room-service serves with a Redis that
// refuses clients without credentials, as production Redis does, whether
// it asks for a password alone (requirepass, user "default") or an ACL user.
func TestPasswordProtectedRedis(t *testing.T) {
	const password = "p@ss/w:rd-s3cret" // characters a URL must escape
	tests := []struct{ name, user string }{
		{"requirepass", "default"},
		{"acl user", "app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := redistest.StartAuth(t, tt.user, password)
			n := startNode(t, rs.URL(), "node-a")
			assert.Equal(t, http.StatusOK, n.ready(t))
			resp, err := n.client(t).Apply(context.Background(), &roompb.ApplyRequest{RoomId: "r1", CommandId: "c1", Op: "join"})
			require.NoError(t, err)
			assert.Equal(t, roompb.ApplyResponse_APPLIED, resp.Status)
			n.Signal(t, syscall.SIGTERM)
			assert.Equal(t, 0, n.ExitCode(t), n.Output())
			out := n.Output()
			assert.Contains(t, out, `"url":"redis://`+tt.user+`:***@`+rs.Addr+`"`, "the URL is logged, redacted")
			assertNoPassword(t, out, password)
			assertJSONLines(t, out)
		})
	}
}

// assertNoPassword fails if out holds password, escaped for a URL or not,
// or a long piece of it.
func assertNoPassword(t *testing.T, out, password string) {
	t.Helper()
	forms := []string{password, url.QueryEscape(password), url.PathEscape(password)}
	for i := 0; i+8 <= len(password); i++ {
		forms = append(forms, password[i:i+8])
	}
	for _, f := range forms {
		if strings.Contains(out, f) {
			t.Errorf("output holds the password (%q)\n%s", f, out)
			return
		}
	}
}

// assertJSONLines fails unless every line of out is one JSON object: the
// service's, fx's and go-redis's lines all go through one slog JSON logger.
func assertJSONLines(t *testing.T, out string) {
	t.Helper()
	for line := range strings.Lines(out) {
		if !json.Valid([]byte(line)) {
			t.Errorf("line is not JSON: %q\n%s", line, out)
		}
	}
}

// A Redis Cluster created beside the service (its nodes up, no slot
// assigned yet) is waited for, not a failed start: Kubernetes or compose
// start both at once, and exit 5 there was a crash loop.
func TestStartWaitsForAClusterBeingCreated(t *testing.T) {
	ctx := context.Background()
	rs := redistest.StartClusterNode(t)
	cl := rs.Client()
	n := &node{
		grpc:  fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)),
		admin: fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)),
	}
	n.Proc = proctest.Start(t, "node-c", proctest.Build(t, "."), "NODE_ID=node-c", "REDIS_CLUSTER_URL=redis://"+rs.Addr,
		"GRPC_ADDR="+n.grpc, "ADMIN_ADDR="+n.admin, "DRAIN_DELAY=300ms", "DRAIN_TIMEOUT=10s", "LEASE_TTL=2s", "BALANCE_INTERVAL=0")
	// The service asked for the slot map (before its first PING, which then
	// found no node): polled, as the node is another process.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(cl.Info(ctx, "commandstats").Val(), "cmdstat_cluster") {
		require.True(t, time.Now().Before(deadline), "the service never asked for the slot map:\n%s", n.Output())
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err())
	n.Await(t, `"new_status":"running"`)
	assert.Equal(t, http.StatusOK, n.ready(t))
	n.Signal(t, syscall.SIGTERM)
	assert.Equal(t, 0, n.ExitCode(t), n.Output())
}
