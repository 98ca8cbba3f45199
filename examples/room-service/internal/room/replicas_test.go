package room

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/redistest"
)

// With WaitReplicas, a command is acknowledged only once a replica has it,
// and so is its event published: while the replica answers nothing, Apply
// answers outcome unknown, and so does the resend, though the primary
// applied the command (the room is loaded again from the primary, whose
// copy nobody confirmed: answering the resend from it is how a failover
// lost acknowledged commands, and "nothing applied" would be false). Once
// the replica is back, the resend is answered as the first application.
func TestApplyWaitsForReplicas(t *testing.T) {
	primary, replica := redistest.StartReplicated(t)
	rdb := primary.Client()
	ctx := context.Background()
	leases := newTestLeases(rdb, "a")
	svc, err := New(rdb, leases, Config{ErrHeld: errHeld, ErrDraining: errDraining, Logger: quiet, WaitReplicas: 1})
	require.NoError(t, err, "New")
	ob, err := NewOutbox(rdb, OutboxConfig{Logger: quiet, WaitReplicas: 1})
	require.NoError(t, err, "NewOutbox")
	published := func() int64 { return rdb.XLen(ctx, DefaultEventStream).Val() }
	mustApply(t, svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	_, err = ob.publish(ctx, "r1")
	require.NoError(t, err, "publish c1's event")
	require.Equal(t, int64(1), published(), "events published")

	replica.Pause()
	for _, what := range []string{"c2", "c2's resend"} {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := apply(actx, svc, "r1", "c2")
		cancel()
		require.Error(t, err, "%s with the replica paused: got %v; want no acknowledgement", what, resp)
		assert.Equal(t, codes.Unknown, status.Code(err), "%s: %v", what, err)
	}
	seq, err := rdb.HGet(ctx, cmdsKey("r1"), "c2").Int64()
	require.NoError(t, err, "c2 on the primary: the test wants it applied there, unconfirmed")
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err = ob.publish(pctx, "r1")
	cancel()
	require.ErrorIs(t, err, errUnreplicated, "publish c2's event with the replica paused")
	require.Equal(t, int64(1), published(), "events published: want c2's held back")

	replica.Resume()
	resp := mustApply(t, svc, "r1", "c2", roompb.ApplyResponse_APPLIED)
	assert.Equal(t, seq, resp.GetSeq(), "c2's seq once confirmed: want the first application's")
	assert.Equal(t, []string{"c1", "c2"}, getRoom(t, svc, "r1").GetCommandIds(), "the room's commands")
	_, err = ob.publish(ctx, "r1")
	require.NoError(t, err, "publish c2's event, confirmed")
	assert.Equal(t, int64(2), published(), "events published")
}
