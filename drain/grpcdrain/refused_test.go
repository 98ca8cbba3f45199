package grpcdrain_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/grpcdrain"
)

func TestRefusedIsDistinguishable(t *testing.T) {
	tests := []struct {
		give error
		want bool
	}{
		{grpcdrain.Refused("draining"), true},
		{status.Error(codes.Unavailable, "transport is closing"), false}, // may have been processed
		{status.Error(codes.Internal, "boom"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := grpcdrain.IsRefused(tt.give); got != tt.want {
			t.Errorf("IsRefused(%v) = %v; want %v", tt.give, got, tt.want)
		}
	}
	tr := new(drain.Tracker)
	tr.CloseIntake()
	_, err := grpcdrain.UnaryInterceptor(tr)(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x.Y/Z"},
		func(context.Context, any) (any, error) { return nil, nil })
	assert.True(t, grpcdrain.IsRefused(err), "the drain's refusal says it processed nothing")
}
