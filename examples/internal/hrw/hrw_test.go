package hrw

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRankStartsWithPreferredAndOrdersByWeight(t *testing.T) {
	addrs := []string{"10.0.0.1:13001", "10.0.0.2:13001", "10.0.0.3:13001", "10.0.0.4:13001"}
	for r := range 200 {
		room := fmt.Sprintf("room-%d", r)
		rank := Rank(room, addrs)
		require.Equal(t, Preferred(room, addrs), rank[0], "%s: first of Rank; want Preferred's", room)
		for i := 1; i < len(rank); i++ {
			require.GreaterOrEqual(t, Weight(room, addrs[rank[i-1]]), Weight(room, addrs[rank[i]]),
				"%s: Rank %v is not in descending weight at %d", room, rank, i)
		}
	}
}

func TestPreferredIgnoresOrderOfAddrs(t *testing.T) {
	tests := []struct{ give, reversed []string }{
		{[]string{"a:1", "b:1", "c:1"}, []string{"c:1", "b:1", "a:1"}},
		{[]string{"127.0.0.1:4001", "127.0.0.1:4002"}, []string{"127.0.0.1:4002", "127.0.0.1:4001"}},
	}
	for _, tt := range tests {
		for r := range 100 {
			room := fmt.Sprintf("r%d", r)
			got, want := tt.reversed[Preferred(room, tt.reversed)], tt.give[Preferred(room, tt.give)]
			assert.Equal(t, want, got, "%s: Preferred over %v", room, tt.reversed)
		}
	}
}
