package grpchealth_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/grpchealth"
)

func TestCheckDefaults(t *testing.T) {
	tests := []struct {
		give     string
		wantName string
	}{
		{"room-service", "room-service"},
		{"", "grpc"},
	}
	for _, tt := range tests {
		c := grpchealth.Check(nil, tt.give)
		assert.Equal(t, tt.wantName, c.Name, "Check(%q)", tt.give)
		assert.Equal(t, 300*time.Millisecond, c.Timeout, "Check(%q)", tt.give)
		assert.Equal(t, readiness.Gating, c.Tier, "Check(%q)", tt.give)
	}
}
