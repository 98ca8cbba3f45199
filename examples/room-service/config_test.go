package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/lease"
)

// LEASE_TTL defaults to lease.DefaultTTL, but to 3 s on Sentinel, whose
// failover would end every session at 1 s; a LEASE_TTL given is kept.
func TestLeaseTTLDefaultFollowsTheRedisKind(t *testing.T) {
	const sentinel = "redis://127.0.0.1:26379?master_name=mymaster"
	tests := []struct {
		name string
		give map[string]string
		want time.Duration
	}{
		{"embedded", map[string]string{}, lease.DefaultTTL},
		{"standalone", map[string]string{"REDIS_URL": "redis://127.0.0.1:6379"}, lease.DefaultTTL},
		{"cluster", map[string]string{"REDIS_CLUSTER_URL": "redis://127.0.0.1:7000"}, lease.DefaultTTL},
		{"sentinel", map[string]string{"REDIS_SENTINEL_URL": sentinel}, 3 * time.Second},
		{"sentinel with LEASE_TTL", map[string]string{"REDIS_SENTINEL_URL": sentinel, "LEASE_TTL": "2s"}, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, err := loadConfig(func(k string) string { return tt.give[k] })
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.LeaseTTL, "LeaseTTL")
		})
	}
}
