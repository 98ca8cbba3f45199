package gatewaybefore

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// forwardApply sends a command to room-service:
//
//  1. through the balanced connection, retried once when refused (the
//     next healthy backend in round-robin order);
//  2. on REDIRECT, once more, directly to the owner's address.
//
// Only a refusal is retried (see [call]): a failure whose outcome is unknown
// goes back to the client as such, since a retry there is only safe with
// the same command_id, which the client owns. A second REDIRECT (the room
// moved again, as during a hand-over) is a refusal: nothing was applied,
// and the client retries, by when the new owner holds the room.
func (a *api) forwardApply(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	rooms, err := a.b.rooms()
	if err != nil {
		return nil, err
	}
	resp, err := retryRefused(ctx, func(opts ...grpc.CallOption) (*roompb.ApplyResponse, error) {
		return rooms.Apply(ctx, req, opts...)
	})
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
	case roompb.ApplyResponse_APPLIED, applyDuplicate:
		return resp, nil
	case roompb.ApplyResponse_REDIRECT:
		return nil, errRefusedf("room %s: owner changed while redirecting (now %s at %s); retry",
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
		resp, err = call(func(opts ...grpc.CallOption) (*roompb.ApplyResponse, error) { return c.Apply(ctx, req, opts...) })
		return err
	})
	return resp, err
}

// retryRefused calls fn, and once more if the call was refused.
func retryRefused[T any](ctx context.Context, fn func(...grpc.CallOption) (T, error)) (T, error) {
	v, err := call(fn)
	if status.Code(err) == codes.Unavailable && ctx.Err() == nil {
		v, err = call(fn)
	}
	return v, err
}

// call runs one RPC and keeps UNAVAILABLE only for a refusal: the server
// said it processed nothing (grpcdrain.IsRefused: room-service's and the drain's
// answers), or the call never reached a server (no peer: no healthy
// backend, connection refused). Any other UNAVAILABLE, a connection that
// broke after the request reached the server, becomes Unknown: it may have
// been processed, and only the client can retry it safely, with the same
// command_id.
func call[T any](fn func(...grpc.CallOption) (T, error)) (T, error) {
	var p peer.Peer
	v, err := fn(grpc.Peer(&p))
	if status.Code(err) == codes.Unavailable && !grpcdrain.IsRefused(err) && p.Addr != nil {
		err = status.Errorf(codes.Unknown, "outcome unknown: backend %s failed after the request reached it: %s",
			p.Addr, status.Convert(err).Message())
	}
	return v, err
}

// errRefusedf is the gateway's own refusal, in the form room-service uses.
func errRefusedf(format string, args ...any) error {
	return grpcdrain.Refused(fmt.Sprintf(format, args...))
}
