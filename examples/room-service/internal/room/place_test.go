package room

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// placeFunc adapts a function to Placement.
type placeFunc func(ctx context.Context, id string) (string, string, error)

func (f placeFunc) Place(ctx context.Context, id string) (string, string, error) { return f(ctx, id) }

// A room without an owner goes where Placement says before anything is
// acquired: REDIRECT to another node, a refusal, or here.
func TestApplyAsksPlacementBeforeAcquiring(t *testing.T) {
	tests := []struct {
		name       string
		give       placeFunc
		wantStatus roompb.ApplyResponse_Status
		wantCode   codes.Code
		wantOwner  string
		wantHeld   bool
	}{
		{
			name:       "placed elsewhere redirects without acquiring",
			give:       func(context.Context, string) (string, string, error) { return "b", "127.0.0.1:2", nil },
			wantStatus: roompb.ApplyResponse_REDIRECT, wantOwner: "b",
		},
		{
			name:     "refused while the room is handed off",
			give:     func(context.Context, string) (string, string, error) { return "", "", errors.New("room r1 is moving") },
			wantCode: codes.Unavailable,
		},
		{
			name:       "no placement acquires here",
			give:       func(context.Context, string) (string, string, error) { return "", "", nil },
			wantStatus: roompb.ApplyResponse_APPLIED, wantHeld: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := startRedis(t)
			leases := newTestLeases(rdb, "a")
			svc, err := New(rdb, leases, Config{ErrHeld: errHeld, ErrDraining: errDraining, Logger: quiet, Placement: tt.give})
			require.NoError(t, err, "New")
			resp, err := apply(context.Background(), svc, "r1", "c1")
			require.Equal(t, tt.wantCode, status.Code(err), "code (err %v)", err)
			if err == nil {
				require.Equal(t, tt.wantStatus, resp.GetStatus(), "status")
			}
			assert.Equal(t, tt.wantOwner, resp.GetOwnerNode(), "owner")
			held, err := rdb.Exists(context.Background(), RouteKey("r1")).Result()
			require.NoError(t, err, "EXISTS room:route:{r1}")
			assert.Equal(t, tt.wantHeld, held == 1, "room:route:{r1} exists")
		})
	}
}
