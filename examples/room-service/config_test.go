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

// REDIS_WAIT_REPLICAS is 0 unless set, and is a whole non-negative
// integer; a bad value is refused naming the variable.
func TestRedisWaitReplicas(t *testing.T) {
	tests := []struct {
		give    string
		want    int
		wantErr bool
	}{
		{"", 0, false},
		{"0", 0, false},
		{"2", 2, false},
		{"-1", 0, true},
		{"1x", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			env := map[string]string{"REDIS_WAIT_REPLICAS": tt.give, "REDIS_URL": "redis://127.0.0.1:6379"}
			c, _, err := loadConfig(func(k string) string { return env[k] })
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), `REDIS_WAIT_REPLICAS="`+tt.give+`"`, "the error names the variable and its value")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.WaitReplicas, "WaitReplicas")
		})
	}
}

// REDIS_WAIT_REPLICAS above 0 without a Redis variable is refused: the
// embedded development Redis has no replica, so every command would fail.
func TestRedisWaitReplicasRefusedOnTheEmbeddedRedis(t *testing.T) {
	_, _, err := loadConfig(func(k string) string { return map[string]string{"REDIS_WAIT_REPLICAS": "1"}[k] })
	require.Error(t, err)
	assert.Contains(t, err.Error(), `REDIS_WAIT_REPLICAS="1"`, "the error names the variable and its value")
	assert.Contains(t, err.Error(), "embedded", "the error says why")
}
