package grpcdrain

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/drainkit/drainkit/drain"
)

// goawaySettle is how long stop_intake serves calls after it begins
// GracefulStop, before it closes intake: a client keeps sending on a
// connection until it reads the GOAWAY, so for about a round trip calls
// still arrive that it sent in good faith. Refused, they would be lost by
// a client that does not retry; served, they are waited for like any.
// The value covers a round trip across regions and a loaded client. The
// settle does not end when this server's GracefulStop returns: another
// server sharing the Tracker may still get calls that raced its GOAWAY.
const goawaySettle = 500 * time.Millisecond

// stopWait bounds how long an Abort waits for srv.Stop.
// grpc-go's Stop waits for every connection still in its handshake, which
// a client that connected and sent nothing holds for the server's
// ConnectionTimeout (120 s by default); with none, Stop returns within
// milliseconds. A drain must end at its deadline, so a Stop still running
// after stopWait goes on by itself until that timeout ends it.
const stopWait = 100 * time.Millisecond

// Hooks returns the three hooks that drain srv, built with [ServerOptions]
// for t. name+".stop_intake" begins GracefulStop (GOAWAY), serves the
// calls that raced it for 500 ms, then closes intake.
// name+".wait_in_flight" waits for the RPCs counted in t, not for the
// streams they leave out. name+".graceful_stop" (Release) waits for
// GracefulStop. The last two begin Stop at their deadline and return, and
// each hook's Abort Stops srv, waiting for Stop at most 100 ms: Stop waits for
// connections still in their handshake, for up to grpc.ConnectionTimeout,
// which bounds how long GracefulStop and that Stop can outlive the drain.
// Do not build srv with grpc.WaitForHandlers(true): its Stop would wait for
// a handler that ignores its context.
func Hooks(name string, srv *grpc.Server, t *drain.Tracker) []drain.Hook {
	var (
		gracefulOnce, stopOnce sync.Once
		gracefulStopped        = make(chan struct{})
		stopped                = make(chan struct{})
	)
	beginGracefulStop := func() {
		gracefulOnce.Do(func() {
			go func() {
				defer close(gracefulStopped)
				srv.GracefulStop()
			}()
		})
	}
	var stopBy time.Time  // the three hooks' Aborts wait until the same time, not 100 ms each
	beginStop := func() { // for a hook at its deadline: drain.Run gives up on one that does not return then
		stopOnce.Do(func() {
			stopBy = time.Now().Add(stopWait)
			go func() {
				defer close(stopped)
				srv.Stop()
			}()
		})
	}
	stop := func() { // Abort: a short wait, so that the server is stopped when drain.Run returns
		beginStop()
		wait := time.NewTimer(time.Until(stopBy))
		defer wait.Stop()
		select {
		case <-stopped:
		case <-wait.C:
		}
	}
	stopIntake := func(ctx context.Context) error {
		beginGracefulStop()
		settle := time.NewTimer(goawaySettle)
		defer settle.Stop()
		select {
		case <-settle.C:
		case <-ctx.Done():
		}
		t.CloseIntake()
		return nil
	}
	wait := func(ctx context.Context) error {
		t.CloseIntake() // in case StopIntake was skipped: also ends untracked streams
		beginGracefulStop()
		if err := t.Wait(ctx); err != nil {
			// Stop does not wait for a handler that ignores its context;
			// GracefulStop would, which is no reason to hold the drain.
			beginStop()
			return err
		}
		return nil
	}
	graceful := func(ctx context.Context) error {
		beginGracefulStop()
		select {
		case <-gracefulStopped: // every RPC and stream finished and was answered
			return nil
		case <-ctx.Done():
			beginStop()
			// Say what GracefulStop waits for: the report has no other clue.
			return fmt.Errorf("%w: GracefulStop still waiting, for an RPC or stream in flight or a connection still in its handshake (grpc.ConnectionTimeout bounds that)", ctx.Err())
		}
	}
	return []drain.Hook{
		{Name: name + ".stop_intake", Phase: drain.StopIntake, Run: stopIntake, Abort: stop},
		{Name: name + ".wait_in_flight", Phase: drain.WaitInFlight, Run: wait, Abort: stop},
		{Name: name + ".graceful_stop", Phase: drain.Release, Run: graceful, Abort: stop},
	}
}
