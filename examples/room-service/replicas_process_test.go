package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/examples/room-service/internal/room"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/redistest"
)

// REDIS_WAIT_REPLICAS reaches the writes it is for: while the replica
// answers nothing, a command is not acknowledged (room.Config) and a room
// is not taken (lease.Config: the route the primary took is deleted). Each
// is tested in its package; this is the variable's wiring. The outbox's
// (room.OutboxConfig) is not shown here: it reads a room only once told of
// it, by a write or a load that the replica confirmed.
func TestRedisWaitReplicasReachesEveryWrite(t *testing.T) {
	primary, replica := redistest.StartReplicated(t)
	rdb := primary.Client()
	ctx := context.Background()
	n := startNode(t, primary.URL(), "node-a", "REDIS_WAIT_REPLICAS=1")
	c := n.client(t)
	apply := func(id, cmd string) (*roompb.ApplyResponse, error) {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return c.Apply(actx, &roompb.ApplyRequest{RoomId: id, CommandId: cmd, Op: "join"})
	}
	published := func() int64 { return rdb.XLen(ctx, room.DefaultEventStream).Val() }
	resp, err := apply("r1", "c1")
	require.NoError(t, err, "c1 with the replica up")
	require.Equal(t, roompb.ApplyResponse_APPLIED, resp.Status)
	require.Eventually(t, func() bool { return published() == 1 }, 10*time.Second, 10*time.Millisecond, "c1's event published")

	replica.Pause()
	_, err = apply("r1", "c2")
	assert.Equal(t, codes.Unknown, status.Code(err), "c2 with the replica paused: got %v; want outcome unknown", err)
	_, err = apply("r2", "c1")
	assert.Error(t, err, "a room taken with the replica paused")
	assert.Zero(t, rdb.Exists(ctx, "room:route:{r2}").Val(), "r2's route, which no replica acknowledged: want it deleted")

	replica.Resume()
	resp, err = apply("r1", "c2")
	require.NoError(t, err, "c2's resend with the replica back")
	assert.Equal(t, roompb.ApplyResponse_APPLIED, resp.Status)
	if !assert.Eventually(t, func() bool { return published() == 2 }, 10*time.Second, 10*time.Millisecond, "c2's event published once confirmed") {
		t.Log(n.Output())
	}
	assert.NotContains(t, n.Output(), "asks for more replicas than the primary has connected", "the replica was connected at the start")
}
