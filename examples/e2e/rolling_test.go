package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/e2e"
)

// steady waits until the load has reached every room and the
// room-services have spread the rooms within the bound (ceil(rooms/nodes)
// +1 on a node), so a fault or an update happens under steady load.
func steady(t *testing.T, ctx context.Context, c *e2e.Cluster) {
	t.Helper()
	require.NoError(t, c.AwaitOwned(ctx, e2e.DefaultLoadRooms), "await every room of the load owned")
	balanced(t, ctx, c, "after the load's warm-up")
}

// loadPastSteady starts a fault scenario's load and waits for the steady
// state: the load runs through the warm-up, however long, and for d after
// the steady state. A load of fixed length could end during a slow
// warm-up: a room that balancing hands off is owned again only when a
// command reaches it, so steady would then wait for an owner that never
// comes, and the fault would find no load.
func loadPastSteady(t *testing.T, ctx context.Context, c *e2e.Cluster, d time.Duration) func() *e2e.LoadResult {
	t.Helper()
	until := make(chan struct{})
	wait := load(t, c, e2e.Load{Duration: bound + d, Until: until})
	steady(t, ctx, c)
	tm := time.AfterFunc(d, func() { close(until) })
	t.Cleanup(func() { tm.Stop() })
	return wait
}

// balanced waits until the rooms are spread within the bound, failing the
// test if they are not by ctx's end, and logs the rooms per node.
func balanced(t *testing.T, ctx context.Context, c *e2e.Cluster, when string) {
	t.Helper()
	per, err := c.AwaitBalanced(ctx, e2e.DefaultLoadRooms)
	require.NoError(t, err, "rooms per node %s", when)
	t.Logf("rooms per node %s: %s", when, e2e.Spread(per))
}

// Load around a rolling update: it runs from before the update until
// loadAfterRoll after the update returned (at most the update's bound, not
// its expected length), so the last old instance exits under load and the
// new ones serve some on their own.
const loadAfterRoll = time.Second

// rollBound is the longest a rolling update of rooms room-services and
// gateways gateways may take: each instance's drain budget (a gateway's
// is DRAIN_TIMEOUT plus its request deadline) and startAllowance for its
// replacement to start and turn ready. Streams closed paced use most of
// the budget by design, so an update with subscribers comes near it.
func rollBound(rooms, gateways int) time.Duration {
	const startAllowance = 10 * time.Second
	return time.Duration(rooms)*(e2e.DefaultDrainTimeout+startAllowance) +
		time.Duration(gateways)*(e2e.DefaultDrainTimeout+e2e.DefaultRequestTimeout+startAllowance)
}

// rollUnderLoad starts the load, waits until every room is owned, runs
// roll, keeps the load going for loadAfterRoll, and returns the load's
// result and what roll drained. It fails the test unless the load was
// still sending when the last old instance exited; within is rollBound of
// what roll replaces.
func rollUnderLoad(t *testing.T, c *e2e.Cluster, within time.Duration, roll func(context.Context) ([]e2e.Drained, error)) (*e2e.LoadResult, []e2e.Drained, e2e.Window) {
	t.Helper()
	stop := make(chan struct{})
	wait := load(t, c, e2e.Load{Duration: within + loadAfterRoll, Until: stop})
	ctx, cancel := context.WithTimeout(context.Background(), bound+within) // steady, then the roll
	defer cancel()
	steady(t, ctx, c)
	w := e2e.Window{From: time.Now()}
	drained, err := roll(ctx)
	w.To = time.Now()
	if err != nil {
		close(stop)
	}
	require.NoError(t, err, "rolling update")
	// The rooms the update left where they landed move to their nodes,
	// paced, under the same load.
	bctx, bcancel := context.WithTimeout(context.Background(), bound)
	balanced(t, bctx, c, "at the end of the update")
	bcancel()
	<-time.After(loadAfterRoll) // the load's length after the update is the scenario, not a wait for a condition
	close(stop)
	res := wait()
	last := e2e.LastExit(drained)
	assert.True(t, res.LastSent.After(last), "load sent its last command at %s, the last old instance exited at %s; want the update to end under load",
		res.LastSent.Format("15:04:05.000"), last.Format("15:04:05.000"))
	return res, drained, w
}

func TestRollingUpdateRoomService(t *testing.T) {
	c, _ := startCluster(t, e2e.Config{})
	res, drained, w := rollUnderLoad(t, c, rollBound(e2e.DefaultRooms, 0), c.RollRooms)
	r := check(t, c, res, drained, w)

	requireCleanRoll(t, drained, e2e.DefaultRooms, e2e.DefaultDrainTimeout)
	assert.NotZero(t, r.RoomsHandedOver, "rooms that changed owner: with none, the update moved nothing")
}

func firstFailure(res *e2e.LoadResult) string {
	for _, o := range res.Outcomes {
		if !o.Acked {
			return o.CommandID + ": " + o.Err
		}
	}
	return "none"
}

func TestRollingUpdateGateway(t *testing.T) {
	c, _ := startCluster(t, e2e.Config{})
	res, drained, w := rollUnderLoad(t, c, rollBound(0, e2e.DefaultGateways), c.RollGateways)
	check(t, c, res, drained, w)
	requireCleanRoll(t, drained, e2e.DefaultGateways, e2e.DefaultDrainTimeout+e2e.DefaultRequestTimeout)
}

// requireCleanRoll checks what every rolling update promises besides no
// failed request (check's): every instance replaced, each old one exiting
// 0 within its DRAIN_TIMEOUT.
func requireCleanRoll(t *testing.T, drained []e2e.Drained, instances int, drainTimeout time.Duration) {
	t.Helper()
	assert.Len(t, drained, instances, "instances replaced")
	for _, d := range drained {
		assert.True(t, d.ExitCode == 0 && d.DrainTime < drainTimeout, "%s: exit %d after %s; want 0 within %s", d.Name, d.ExitCode, d.DrainTime, drainTimeout)
	}
}
