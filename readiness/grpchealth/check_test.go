package grpchealth_test

import (
	"testing"
	"time"

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
		if c.Name != tt.wantName || c.Timeout != 300*time.Millisecond || c.Tier != readiness.Gating {
			t.Errorf("Check(%q): got %s %v %v; want %s 300ms gating", tt.give, c.Name, c.Timeout, c.Tier, tt.wantName)
		}
	}
}
