package main

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// forwardApply sends a command to room-service:
//
//  1. through the balanced connection, retried once on UNAVAILABLE (the
//     next healthy backend in round-robin order);
//  2. on REDIRECT, once more, directly to the owner's address.
//
// Retrying is safe because room-service applies a command_id at most once:
// a retry of a command that was in fact written answers DUPLICATE with its
// seq. A second REDIRECT (the room moved again, as during a hand-over) is
// UNAVAILABLE: the client retries, by when the new owner holds the room.
func (a *api) forwardApply(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	rooms, err := a.b.rooms()
	if err != nil {
		return nil, err
	}
	resp, err := retryUnavailable(ctx, func() (*roompb.ApplyResponse, error) { return rooms.Apply(ctx, req) })
	if err != nil {
		return nil, err
	}
	if resp.GetStatus() == roompb.ApplyResponse_REDIRECT {
		resp, err = a.followRedirect(ctx, req, resp)
		if err != nil {
			return nil, err
		}
	}
	switch resp.GetStatus() {
	case roompb.ApplyResponse_APPLIED, roompb.ApplyResponse_DUPLICATE:
		return resp, nil
	case roompb.ApplyResponse_REDIRECT:
		return nil, status.Errorf(codes.Unavailable, "room %s: owner changed while redirecting (now %s at %s); retry",
			req.GetRoomId(), resp.GetOwnerNode(), resp.GetOwnerAddr())
	}
	return nil, status.Errorf(codes.Internal, "room %s: room-service answered status %s", req.GetRoomId(), resp.GetStatus())
}

// followRedirect sends the command to the owner named by redirect.
func (a *api) followRedirect(ctx context.Context, req *roompb.ApplyRequest, redirect *roompb.ApplyResponse) (*roompb.ApplyResponse, error) {
	addr := redirect.GetOwnerAddr()
	if err := checkHostPort(addr); err != nil {
		return nil, status.Errorf(codes.Internal, "room %s: owner %s has address %q: %v", req.GetRoomId(), redirect.GetOwnerNode(), addr, err)
	}
	var resp *roompb.ApplyResponse
	err := a.b.withOwner(addr, func(c roompb.RoomsClient) error {
		var err error
		resp, err = c.Apply(ctx, req)
		return err
	})
	return resp, err
}

// retryUnavailable calls fn, and once more if it fails with UNAVAILABLE
// while ctx is still live.
func retryUnavailable[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	v, err := fn()
	if status.Code(err) == codes.Unavailable && ctx.Err() == nil {
		v, err = fn()
	}
	return v, err
}
