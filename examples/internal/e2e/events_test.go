package e2e

import (
	"testing"
	"time"
)

func TestCheckOwnership(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(node, event string, fence int64, ms int, cause string) LeaseEvent {
		return LeaseEvent{Node: node, Event: event, Room: "r", Fence: fence, At: at(ms), Cause: cause}
	}
	tests := []struct {
		name                  string
		give                  []LeaseEvent
		exits                 map[string]time.Time
		stops                 map[string][]Window
		wantDouble, wantFence int
		wantGaps              []time.Duration
	}{
		{"clean hand-over", []LeaseEvent{
			ev("a", "acquired", 1, 0, ""), ev("a", "ended", 1, 100, "lease: released"), ev("b", "acquired", 2, 150, ""),
		}, nil, nil, 0, 0, []time.Duration{50 * time.Millisecond}},
		{"overlap", []LeaseEvent{
			ev("a", "acquired", 1, 0, ""), ev("b", "acquired", 2, 50, ""), ev("a", "ended", 1, 100, "lease: released"),
		}, nil, nil, 1, 0, nil},
		{"still open", []LeaseEvent{ev("a", "acquired", 1, 0, ""), ev("b", "acquired", 2, 50, "")}, nil, nil, 1, 0, nil},
		{"crash ends at exit", []LeaseEvent{ev("a", "acquired", 1, 0, ""), ev("b", "acquired", 2, 2100, "")},
			map[string]time.Time{"a": at(100)}, nil, 0, 0, []time.Duration{2 * time.Second}},
		{"lost while stopped ends at the stop", []LeaseEvent{
			ev("a", "acquired", 1, 0, ""), ev("b", "acquired", 2, 2100, ""), ev("a", "ended", 1, 4000, "lease: lost: no renewal confirmed"),
		}, nil, map[string][]Window{"a": {{From: at(100), To: at(3900)}}}, 0, 0, []time.Duration{2 * time.Second}},
		{"released after a stop is not moved", []LeaseEvent{
			ev("a", "acquired", 1, 0, ""), ev("b", "acquired", 2, 2100, ""), ev("a", "ended", 1, 4000, "lease: released"),
		}, nil, map[string][]Window{"a": {{From: at(100), To: at(3900)}}}, 1, 0, nil},
		{"lost long after a short stop is not moved", []LeaseEvent{
			ev("a", "acquired", 1, 0, ""), ev("b", "acquired", 2, 5000, ""), ev("a", "ended", 1, 6000, "lease: lost"),
		}, nil, map[string][]Window{"a": {{From: at(100), To: at(600)}}}, 1, 0, nil},
		{"lost long after waking from a long stop is not moved", []LeaseEvent{
			ev("a", "acquired", 1, 0, ""), ev("b", "acquired", 2, 7000, ""), ev("a", "ended", 1, 9000, "lease: lost"),
		}, nil, map[string][]Window{"a": {{From: at(100), To: at(3900)}}}, 1, 0, nil},
		{"lost before a stop is not moved", []LeaseEvent{
			ev("a", "acquired", 1, 0, ""), ev("b", "acquired", 2, 50, ""), ev("a", "ended", 1, 90, "lease: lost"),
		}, nil, map[string][]Window{"a": {{From: at(100), To: at(3900)}}}, 1, 0, nil},
		{"overlap with an earlier hold than the neighbour", []LeaseEvent{
			ev("a", "acquired", 1, 0, ""), ev("b", "acquired", 2, 100, ""), ev("b", "ended", 2, 200, "lease: released"),
			ev("c", "acquired", 3, 300, ""), ev("c", "ended", 3, 400, "lease: released"), ev("a", "ended", 1, 1000, "lease: released"),
			ev("d", "acquired", 4, 1100, ""),
		}, nil, nil, 2, 0, []time.Duration{100 * time.Millisecond}},
		{"open earlier hold overlaps every later one", []LeaseEvent{
			ev("a", "acquired", 1, 0, ""), ev("b", "acquired", 2, 100, ""), ev("b", "ended", 2, 200, "lease: released"),
			ev("c", "acquired", 3, 300, ""),
		}, nil, nil, 2, 0, nil},
		{"fence below an earlier hold's, above the neighbour's", []LeaseEvent{
			ev("a", "acquired", 5, 0, ""), ev("a", "ended", 5, 100, "lease: released"),
			ev("b", "acquired", 2, 150, ""), ev("b", "ended", 2, 200, "lease: released"),
			ev("c", "acquired", 3, 250, ""),
		}, nil, nil, 0, 2, []time.Duration{50 * time.Millisecond, 50 * time.Millisecond}},
		{"fence regression", []LeaseEvent{
			ev("a", "acquired", 5, 0, ""), ev("a", "ended", 5, 100, "lease: released"), ev("b", "acquired", 4, 150, ""),
		}, nil, nil, 0, 1, []time.Duration{50 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := CheckOwnership(tt.give, tt.exits, tt.stops, 2*time.Second)
			if len(o.DoubleOwners) != tt.wantDouble {
				t.Errorf("double owners: got %v; want %d", o.DoubleOwners, tt.wantDouble)
			}
			if len(o.FenceRegressions) != tt.wantFence {
				t.Errorf("fence regressions: got %v; want %d", o.FenceRegressions, tt.wantFence)
			}
			if len(o.Gaps) != len(tt.wantGaps) {
				t.Fatalf("gaps: got %v; want %v", o.Gaps, tt.wantGaps)
			}
			for i := range o.Gaps {
				if o.Gaps[i] != tt.wantGaps[i] {
					t.Errorf("gap %d: got %s; want %s", i, o.Gaps[i], tt.wantGaps[i])
				}
			}
		})
	}
}
