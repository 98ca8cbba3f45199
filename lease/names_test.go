package lease

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
	if err != nil {
		t.Fatalf("New(rooms): %v", err)
	}
	mg, err := New(c, games)
	if err != nil {
		t.Fatalf("New(games) on the same Registerer: %v; want both registered", err)
	}
	noop := func(context.Context, *Lease) error { return nil }
	hr, err := mr.HandOff(noop, 1)
	if err != nil {
		t.Fatal(err)
	}
	hg, err := mg.HandOff(noop, 1)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, h := range []string{hr.Name, mr.ReleaseHook().Name, hg.Name, mg.ReleaseHook().Name} {
		if seen[h] {
			t.Errorf("hook name %q used twice; want one per manager", h)
		}
		seen[h] = true
	}
	for _, m := range []*Manager{mr, mg} {
		if err := m.Start(context.Background()); err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() { _ = m.Stop(context.Background()) })
	}
	if _, err := mg.Acquire(context.Background(), "chess"); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	held := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "room_leases_held" {
			for _, mt := range mf.GetMetric() {
				held[labelValue(mt, "route_prefix")] = mt.GetGauge().GetValue()
			}
		}
	}
	if held["room:route:"] != 0 || held["game:route:"] != 1 || len(held) != 2 {
		t.Errorf("room_leases_held by route_prefix = %v; want room:route: 0, game:route: 1", held)
	}

	_, err = New(c, games)
	if err == nil || !strings.Contains(err.Error(), `RoutePrefix "game:route:"`) {
		t.Fatalf("New with a RoutePrefix already registered: got %v; want an error naming RoutePrefix \"game:route:\"", err)
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
