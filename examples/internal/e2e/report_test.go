package e2e

import "testing"

func TestBalanceBound(t *testing.T) {
	tests := []struct {
		rooms, nodes, want int
	}{
		{20, 3, 8}, // ceil(20/3) = 7, plus one
		{21, 3, 8},
		{22, 3, 9},
		{1, 3, 2},
		{0, 3, 1},
		{5, 0, 0}, // no node: nothing may hold a room
	}
	for _, tt := range tests {
		if got := BalanceBound(tt.rooms, tt.nodes); got != tt.want {
			t.Errorf("BalanceBound(%d, %d): got %d; want %d", tt.rooms, tt.nodes, got, tt.want)
		}
	}
}

func TestSpreadNamesTheBound(t *testing.T) {
	got := Spread(map[string]int{"room-2": 6, "room-1": 9, "room-3": 5})
	want := "room-1: 9, room-2: 6, room-3: 5 (max 9; ceil(20/3)+1 = 8)"
	if got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestGatewayRetriesSaysTheTotalAndEachCause(t *testing.T) {
	tests := []struct {
		give GatewayRetries
		want string
	}{
		{nil, "0"},
		{GatewayRetries{"refused": 3}, "3 (after refused: 3)"},
		{GatewayRetries{"unknown": 1, "refused": 2}, "3 (after refused: 2, after unknown: 1)"},
	}
	for _, tt := range tests {
		if got := tt.give.String(); got != tt.want {
			t.Errorf("%v: got %q; want %q", map[string]int(tt.give), got, tt.want)
		}
	}
}
