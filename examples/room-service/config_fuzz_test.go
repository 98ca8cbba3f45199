package main

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/lifecycle"
)

// FuzzConfig: whatever room-service's own variables hold, loadConfig
// refuses them naming a variable that was set, or accepts each one as the
// whole value reads (HANDOFF_CONCURRENCY=8x is not 8).
func FuzzConfig(f *testing.F) {
	f.Add(":13001", "2s", "8", "1s", "500ms")
	f.Add("nohost", "", "", "", "")
	f.Add("", "1ms", "0", "-1s", "1ms")
	f.Add("", "", "8abc", "", "")
	f.Add("", "", "", "0", "")
	f.Fuzz(func(t *testing.T, grpcAddr, leaseTTL, handOff, balance, snapshot string) {
		vars := map[string]string{"GRPC_ADDR": grpcAddr, "LEASE_TTL": leaseTTL, "HANDOFF_CONCURRENCY": handOff,
			"BALANCE_INTERVAL": balance, "SNAPSHOT_INTERVAL": snapshot, "NODE_ID": "n1"}
		c, _, err := loadConfig(func(k string) string { return vars[k] })
		if err != nil {
			var ce *configError
			if errors.As(err, &ce) {
				assert.NotEmpty(t, vars[ce.Field], "got %q; want a variable that was set", err)
			} else {
				assert.ErrorIs(t, err, lifecycle.ErrConfig, "got %v", err)
			}
			return
		}
		durations := []struct {
			v   string
			got time.Duration
		}{{leaseTTL, c.LeaseTTL}, {balance, c.BalanceInterval}, {snapshot, c.SnapshotInterval}}
		for _, d := range durations {
			if d.v != "" {
				want, perr := time.ParseDuration(d.v)
				require.NoError(t, perr, "%q was accepted", d.v)
				assert.Equal(t, want, d.got, "%q", d.v)
			}
		}
		if handOff != "" {
			n, perr := strconv.Atoi(handOff)
			require.NoError(t, perr, "HANDOFF_CONCURRENCY=%q was accepted", handOff)
			assert.Equal(t, n, c.HandOffMax, "HANDOFF_CONCURRENCY=%q", handOff)
		}
	})
}
