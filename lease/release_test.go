package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReleasePastExpiry: once lastOK+TTL has passed, Release still asks
// Redis once. A key that is gone is reported as ErrNotHeld ("expired"); a
// key still ours (renewals landed whose replies were lost) is deleted.
func TestReleasePastExpiry(t *testing.T) {
	tests := []struct {
		name    string
		expire  bool // the key expired in Redis
		wantErr error
	}{
		{"key expired", true, ErrNotHeld},
		{"key still ours", false, nil},
	}
	b := standalone(t)
	c := b.client()
	cfg := testConfig()
	// The renewer's first wake is a minute away: it cannot touch the
	// lease while the test ages it.
	cfg.TTL, cfg.RenewInterval = 3*time.Minute, time.Minute
	m := startManager(t, c, cfg)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := strings.ReplaceAll(tt.name, " ", "-")
			l, err := m.Acquire(ctx, id)
			require.NoError(t, err, "Acquire")
			if tt.expire {
				expireNow(t, c, l.key)
			}
			l.lastOK.Store(time.Now().Add(-cfg.TTL - time.Second).UnixNano()) // no renewal confirmed for over a TTL

			err = l.Release(ctx)
			if tt.wantErr == nil {
				assert.NoError(t, err, "Release")
			} else {
				assert.ErrorIs(t, err, tt.wantErr, "Release")
				assert.ErrorContains(t, err, "expired", "Release")
			}
			assert.Zero(t, c.Exists(ctx, l.key).Val(), "key exists after Release")
		})
	}
}
