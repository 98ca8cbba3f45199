package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/drainkit/drainkit/internal/e2e"
)

// steady waits until the load has reached every room, so an update
// happens under steady load with every room owned.
func steady(t *testing.T, ctx context.Context, c *e2e.Cluster) {
	t.Helper()
	if err := c.AwaitOwned(ctx, e2e.DefaultLoadRooms); err != nil {
		t.Fatal(err)
	}
}

func TestRollingUpdateRoomService(t *testing.T) {
	c, _ := startCluster(t, e2e.Config{})
	wait := load(t, c, e2e.Load{Duration: 8 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	steady(t, ctx, c)
	drained, err := c.RollRooms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := wait()
	r := check(t, c, res, drained)

	if r.Failed != 0 {
		t.Errorf("failed requests: got %d; want 0 (first: %s)", r.Failed, firstFailure(res))
	}
	if len(drained) != e2e.DefaultRooms {
		t.Errorf("instances replaced: got %d; want %d", len(drained), e2e.DefaultRooms)
	}
	for _, d := range drained {
		if d.ExitCode != 0 || d.DrainTime >= e2e.DefaultDrainTimeout {
			t.Errorf("%s: exit %d after %s; want 0 within %s", d.Name, d.ExitCode, d.DrainTime, e2e.DefaultDrainTimeout)
		}
	}
	if r.RoomsHandedOver == 0 {
		t.Error("no room changed owner: the update moved nothing")
	}
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
	wait := load(t, c, e2e.Load{Duration: 8 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	steady(t, ctx, c)
	drained, err := c.RollGateways(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := wait()
	r := check(t, c, res, drained)
	if r.Failed != 0 {
		t.Errorf("failed requests: got %d; want 0 (first: %s)", r.Failed, firstFailure(res))
	}
	if len(drained) != e2e.DefaultGateways {
		t.Errorf("gateways replaced: got %d; want %d", len(drained), e2e.DefaultGateways)
	}
	for _, d := range drained {
		if d.ExitCode != 0 || d.DrainTime >= e2e.DefaultDrainTimeout {
			t.Errorf("%s: exit %d after %s; want 0 within %s", d.Name, d.ExitCode, d.DrainTime, e2e.DefaultDrainTimeout)
		}
	}
}
