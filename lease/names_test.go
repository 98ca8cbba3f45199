package lease

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwoManagersInOneApplication: two managers with their own keys share
// one Registerer and one drain; their hook names and metrics must not
// collide, and two managers that would collide are refused by name.
func TestTwoManagersInOneApplication(t *testing.T) {
	b := standalone(t)
	c := b.client()
	reg := prometheus.NewRegistry()
	rooms := testConfig()
	rooms.Registerer = reg
	games := rooms
	games.RoutePrefix, games.FencePrefix, games.NodePrefix = "game:route:", "game:fence:", "game:node:"

	mr, err := New(c, rooms)
	require.NoError(t, err, "New(rooms)")
	mg, err := New(c, games)
	require.NoError(t, err, "New(games) on the same Registerer: want both registered")
	noop := func(context.Context, *Lease) error { return nil }
	hr, err := mr.HandOff(noop, 1)
	require.NoError(t, err)
	hg, err := mg.HandOff(noop, 1)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, h := range []string{hr.Name, mr.ReleaseHook().Name, hg.Name, mg.ReleaseHook().Name} {
		assert.False(t, seen[h], "hook name %q used twice; want one per manager", h)
		seen[h] = true
	}
	for _, m := range []*Manager{mr, mg} {
		require.NoError(t, m.Start(context.Background()), "Start")
		t.Cleanup(func() { _ = m.Stop(context.Background()) })
	}
	_, err = mg.Acquire(context.Background(), "chess")
	require.NoError(t, err, "Acquire")
	held := map[string]float64{}
	mfs, err := reg.Gather()
	require.NoError(t, err, "Gather")
	for _, mf := range mfs {
		if mf.GetName() == "room_leases_held" {
			for _, mt := range mf.GetMetric() {
				held[labelValue(mt, "route_prefix")] = mt.GetGauge().GetValue()
			}
		}
	}
	assert.Zero(t, held["room:route:"], "room_leases_held of room:route: in %v", held)
	assert.Equal(t, 1.0, held["game:route:"], "room_leases_held of game:route: in %v", held)
	assert.Len(t, held, 2, "room_leases_held by route_prefix")

	_, err = New(c, games)
	require.ErrorContains(t, err, `RoutePrefix "game:route:"`, "New with a RoutePrefix already registered")
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
