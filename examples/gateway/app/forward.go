package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// maxRedirects bounds the REDIRECTs one attempt follows: a room moves once
// per hand-off, so more than a few in a row means it is moving right now,
// and the next attempt (after a backoff) finds it settled.
const maxRedirects = 3

// forwardApply sends a command to room-service and waits out, within ctx
// (see [within]), whatever keeps it from an answer for a while. Each
// attempt goes through the balanced connection (waiting for a ready
// backend) and follows REDIRECTs directly to the owner. Resending after an
// attempt whose outcome is unknown is safe: room-service applies a
// command_id at most once and answers a resend with the first
// application's seq.
func (a *api) forwardApply(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	resp, err := within(ctx, a.retried, "an earlier one may have been applied", func(ctx context.Context) (*roompb.ApplyResponse, error) {
		return a.applyOnce(ctx, req)
	})
	if u, ok := errors.AsType[*afterUnknown](err); ok {
		// A failure (INTERNAL, a version skew's INVALID_ARGUMENT) that says
		// nothing of the earlier attempt, which may have been applied: 504.
		st := status.Convert(u.err)
		a.log.Warn("room backend failed after an attempt of unknown outcome", "room", req.GetRoomId(), "code", st.Code().String(), "err", st.Message())
		return nil, status.Errorf(codes.DeadlineExceeded, "attempt %d failed (%s: %s), an earlier one may have been applied", u.attempts, st.Code(), st.Message())
	}
	return resp, err
}

// applyOnce is one attempt of forwardApply: to the room's owner if a
// REDIRECT named it before, else through the balanced connection.
func (a *api) applyOnce(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	release, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	room := req.GetRoomId()
	resp, addr, err := a.applyToOwner(ctx, req)
	if resp == nil && err == nil {
		var rooms roompb.RoomsClient
		if rooms, err = a.b.rooms(); err != nil {
			return nil, err
		}
		resp, err = call(ctx, a.b, "", func(ctx context.Context, pk *pick, opts ...grpc.CallOption) (*roompb.ApplyResponse, error) {
			return rooms.Apply(withPick(ctx, room, a.b.stalls, pk), req, append(opts, grpc.WaitForReady(true))...)
		})
	}
	learned := false // addr came from a REDIRECT, not from a.owners
	for hop := 0; err == nil && resp.GetStatus() == roompb.ApplyResponse_REDIRECT; hop++ {
		if hop == maxRedirects {
			return nil, errRefusedf("room %s: still moving after %d redirects (now %s at %s)",
				room, hop, resp.GetOwnerNode(), resp.GetOwnerAddr())
		}
		addr, learned = resp.GetOwnerAddr(), true
		resp, err = a.followRedirect(ctx, req, resp)
	}
	if err != nil {
		return nil, err
	}
	switch resp.GetStatus() {
	case roompb.ApplyResponse_APPLIED:
		if learned {
			a.owners.set(room, addr)
		}
		return resp, nil
	}
	return nil, status.Errorf(codes.Internal, "room %s: room-service answered status %s", room, resp.GetStatus())
}

// applyToOwner sends req to the room's remembered owner, if any, and
// returns its answer and address. An owner that refuses (nothing applied:
// it lost or is handing off the room, is draining, or is gone) is
// forgotten and nil, "", nil returned, so the attempt goes on through the
// balanced connection at once; any other failure forgets it too and ends
// the attempt.
func (a *api) applyToOwner(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, string, error) {
	room := req.GetRoomId()
	addr, ok := a.owners.get(room)
	if !ok {
		return nil, "", nil
	}
	if a.b.stalls.stalled(addr) {
		a.owners.drop(room, addr)
		return nil, "", nil
	}
	resp, err := a.applyAt(ctx, req, addr)
	if err == nil {
		return resp, addr, nil
	}
	a.owners.drop(room, addr)
	if status.Code(err) == codes.Unavailable && ctx.Err() == nil {
		return nil, "", nil
	}
	return nil, "", err
}

// followRedirect sends the command to the owner named by redirect, without
// waiting for a connection: an owner that refuses connections has crashed
// or left, and the next attempt looks the owner up again.
func (a *api) followRedirect(ctx context.Context, req *roompb.ApplyRequest, redirect *roompb.ApplyResponse) (*roompb.ApplyResponse, error) {
	addr := redirect.GetOwnerAddr()
	if err := checkHostPort(addr); err != nil {
		return nil, status.Errorf(codes.Internal, "room %s: owner %s has address %q: %v", req.GetRoomId(), redirect.GetOwnerNode(), addr, err)
	}
	if a.b.stalls.stalled(addr) {
		// Not answering: the room is free once its lease expires, and the
		// next attempt's node takes it then.
		return nil, errRefusedf("room %s: owner %s at %s is not answering", req.GetRoomId(), redirect.GetOwnerNode(), addr)
	}
	return a.applyAt(ctx, req, addr)
}

// applyAt sends the command to the room-service at addr, an address
// already checked.
func (a *api) applyAt(ctx context.Context, req *roompb.ApplyRequest, addr string) (*roompb.ApplyResponse, error) {
	var resp *roompb.ApplyResponse
	err := a.b.withOwner(addr, func(conn *grpc.ClientConn) error {
		var err error
		resp, err = call(ctx, a.b, addr, func(ctx context.Context, _ *pick, opts ...grpc.CallOption) (*roompb.ApplyResponse, error) {
			return roompb.NewRoomsClient(conn).Apply(ctx, req, opts...)
		})
		return err
	})
	return resp, err
}

// getOnce reads a room through the balanced connection, waiting for a
// ready backend; any room-service answers for any room.
func (a *api) getOnce(ctx context.Context, id string) (*roompb.Room, error) {
	release, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	rooms, err := a.b.rooms()
	if err != nil {
		return nil, err
	}
	return call(ctx, a.b, "", func(ctx context.Context, pk *pick, opts ...grpc.CallOption) (*roompb.Room, error) {
		return rooms.GetRoom(withPick(ctx, "", a.b.stalls, pk), &roompb.GetRoomRequest{RoomId: id}, append(opts, grpc.WaitForReady(true))...)
	})
}

// call runs one attempt of an RPC, to addr ("" when the balanced
// connection picks: fn then routes through withPick), within the attempt
// budget, and sorts its failure by what it says about the outcome:
//
//   - UNAVAILABLE stays only for a refusal: the server said it processed
//     nothing (grpcdrain.IsRefused), or the call never reached a server
//     (no peer: no ready backend, connection refused, no HTTP/2 answer).
//   - A call that reached a server and then broke, or that the budget cut
//     short there, is Unknown: it may have been processed.
//   - A call that ran out of time before reaching any server is a refusal
//     too; after reaching one, the request's own deadline leaves it
//     DEADLINE_EXCEEDED.
//
// A backend that let the budget pass is marked stalled, so the next attempt
// goes elsewhere; not one picked after waiting for a ready backend took
// most of the budget.
func call[T any](ctx context.Context, b *backends, addr string, fn func(context.Context, *pick, ...grpc.CallOption) (T, error)) (T, error) {
	budget := b.cfg.attemptTimeout()
	actx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var p peer.Peer
	pk := &pick{}
	start := time.Now()
	v, err := fn(actx, pk, grpc.Peer(&p))
	code := status.Code(err)
	// The budget was spent whether the client's timer or the server's copy
	// of the deadline (a hair earlier) ended the call.
	spent := time.Since(start) >= budget*9/10
	if code == codes.DeadlineExceeded && spent && ctx.Err() == nil {
		target, at := addr, time.Time{}
		if target == "" {
			target, at = pk.get()
		}
		if target != "" && (addr != "" || time.Since(at) >= budget/2) {
			b.stalls.mark(target)
			if p.Addr != nil {
				return v, status.Errorf(codes.Unknown, "outcome unknown: backend %s did not answer within the attempt budget %s", target, budget)
			}
			return v, status.Errorf(codes.Unavailable, "backend %s took no call within the attempt budget %s", target, budget)
		}
	}
	switch {
	case code == codes.Unavailable && !grpcdrain.IsRefused(err) && p.Addr != nil:
		err = status.Errorf(codes.Unknown, "outcome unknown: backend %s failed after the request reached it: %s",
			p.Addr, status.Convert(err).Message())
	case (code == codes.DeadlineExceeded || code == codes.Canceled) && p.Addr == nil:
		err = status.Errorf(codes.Unavailable, "no room backend reached in time: %s", status.Convert(err).Message())
	}
	return v, err
}

// errRefusedf is the gateway's own refusal, in the form room-service uses.
func errRefusedf(format string, args ...any) error {
	return grpcdrain.Refused(fmt.Sprintf(format, args...))
}
