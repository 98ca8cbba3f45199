package grpcdrain

import (
	"context"
	"sync"

	"google.golang.org/grpc"

	"github.com/drainkit/drainkit/drain"
)

// Hooks returns the three hooks that drain srv, which must have been built
// with [ServerOptions] for t, so that an RPC counts until its response is
// written.
//
// StopIntake: intake is closed and GracefulStop begins: listeners close and
// clients are sent GOAWAY, so they pick another backend for new RPCs.
//
// WaitInFlight: waits for the RPCs counted in t to be answered. Long-lived
// streams that are not counted do not hold it: grpc.health.v1 Watch
// streams, which closing intake ended, and the streams registered with a
// [drain.Streams], which its hooks close paced while the later phases go
// on. At its deadline it Stops the server (cutting off what still runs)
// and returns the context's error.
//
// Release (name+".graceful_stop"): waits for GracefulStop, which returns
// once every RPC and stream has finished and its answer is flushed; at its
// deadline it Stops the server. The streams' own hook, in the same phase,
// closes what is left of them when only their margin remains.
//
// Every hook carries an Abort that Stops srv, so a drain cut short (forced,
// or out of time) before the server stopped still closes every connection.
// Do not build srv with grpc.WaitForHandlers(true): its Stop then waits for
// every handler, and one that ignores its context would hold the Abort.
func Hooks(name string, srv *grpc.Server, t *drain.Tracker) []drain.Hook {
	var (
		once    sync.Once
		stopped = make(chan struct{})
	)
	begin := func() {
		once.Do(func() {
			go func() {
				defer close(stopped)
				srv.GracefulStop()
			}()
		})
	}
	stop := func(context.Context) error {
		t.CloseIntake()
		begin()
		return nil
	}
	wait := func(ctx context.Context) error {
		t.CloseIntake() // in case StopIntake was skipped: also ends untracked streams
		begin()
		if err := t.Wait(ctx); err != nil {
			// Stop closes every connection at once and does not wait for
			// handlers; GracefulStop (and its goroutine) still waits for a
			// handler that ignores its context, which is no reason to hold
			// the drain.
			srv.Stop()
			return err
		}
		return nil
	}
	graceful := func(ctx context.Context) error {
		begin()
		select {
		case <-stopped: // every RPC and stream finished and was answered
			return nil
		case <-ctx.Done():
			srv.Stop()
			return ctx.Err()
		}
	}
	return []drain.Hook{
		{Name: name + ".stop_intake", Phase: drain.StopIntake, Run: stop, Abort: srv.Stop},
		{Name: name + ".wait_in_flight", Phase: drain.WaitInFlight, Run: wait, Abort: srv.Stop},
		{Name: name + ".graceful_stop", Phase: drain.Release, Run: graceful, Abort: srv.Stop},
	}
}
