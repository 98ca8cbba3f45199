package lease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
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
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if tt.expire {
				expireNow(t, c, l.key)
			}
			l.lastOK.Store(time.Now().Add(-cfg.TTL - time.Second).UnixNano()) // no renewal confirmed for over a TTL

			err = l.Release(ctx)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Errorf("Release: got %v; want nil", err)
			case tt.wantErr != nil && (!errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), "expired")):
				t.Errorf("Release: got %v; want %v (expired)", err, tt.wantErr)
			}
			if n := c.Exists(ctx, l.key).Val(); n != 0 {
				t.Errorf("key exists %d after Release; want 0", n)
			}
		})
	}
}
