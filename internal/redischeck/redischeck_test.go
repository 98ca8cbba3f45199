package redischeck

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAtLeastVersion(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"7.0.15", true},
		{"5.0.0", true},
		{"4.0.14", false},
		{"4.9", false},
		{"10.0.0", true},
		{"", true},    // unreadable: the scripts fail loudly themselves
		{"x.y", true}, // unparseable likewise
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, atLeast(tt.give, minVersion), "atLeast(%q, 5.0.0)", tt.give)
	}
}
