package room

import (
	"context"
	"errors"
	"testing"

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
			if err != nil {
				t.Fatal(err)
			}
			resp, err := apply(context.Background(), svc, "r1", "c1")
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("code: got %v (%v); want %v", got, err, tt.wantCode)
			}
			if got := resp.GetStatus(); err == nil && got != tt.wantStatus {
				t.Fatalf("status: got %v; want %v", got, tt.wantStatus)
			}
			if got := resp.GetOwnerNode(); got != tt.wantOwner {
				t.Errorf("owner: got %q; want %q", got, tt.wantOwner)
			}
			held, err := rdb.Exists(context.Background(), RouteKey("r1")).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := held == 1; got != tt.wantHeld {
				t.Errorf("room:route:{r1} exists: got %v; want %v", got, tt.wantHeld)
			}
		})
	}
}
