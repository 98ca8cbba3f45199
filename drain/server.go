package drain

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"

	"google.golang.org/grpc"
)

// HTTPHooks returns the two hooks that drain srv, whose handler must be
// wrapped by t.Middleware. Call it before srv.Serve: it wraps srv.ConnState
// to know when each response has been written out, which the handler's
// return alone does not tell (the server flushes after the handler).
//
// StopIntake: intake is closed (later requests on kept-alive connections get
// 503 and Connection: close), keep-alives are turned off, and the listeners
// are closed; the hook returns once they are. Should the drain end (forced
// by a second signal, or out of time) before WaitInFlight closed the
// server, every connection is closed then.
//
// WaitInFlight: waits for t to reach zero and for every response to be
// written, then closes every remaining (idle) connection at once. It does not poll like http.Server.Shutdown,
// whose schedule grows to 500 ms: the drain moves on within a millisecond of
// the last request ending. At its deadline it closes every connection,
// in-flight or not, and returns the context's error. Hijacked connections
// (WebSockets) are neither waited for nor closed, as with Shutdown.
func HTTPHooks(name string, srv *http.Server, t *Tracker) []Hook {
	var (
		once     sync.Once
		closed                      = make(chan struct{}) // listeners closed
		shutdown                    = make(chan struct{}) // Shutdown goroutine returned
		cancel   context.CancelFunc = func() {}
	)
	srv.RegisterOnShutdown(func() { close(closed) }) // Shutdown runs this right after closing listeners
	active := watchActive(srv)
	begin := func() {
		once.Do(func() {
			var ctx context.Context
			ctx, cancel = context.WithCancel(context.Background())
			go func() {
				defer close(shutdown)
				_ = srv.Shutdown(ctx) // only for its listener closing; we stop its polling below
			}()
		})
	}
	stop := func(ctx context.Context) error {
		t.CloseIntake()
		srv.SetKeepAlivesEnabled(false)
		begin()
		// If the drain is forced or runs out of time before WaitInFlight
		// has closed the server, close it here: later phases are skipped
		// then, and no connection or goroutine of ours may outlive the drain.
		context.AfterFunc(drainContext(ctx), func() {
			_ = srv.Close()
			cancel()
		})
		select {
		case <-closed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	wait := func(ctx context.Context) error {
		begin() // in case StopIntake was skipped or failed
		err := t.Wait(ctx)
		if err == nil {
			err = active.Wait(ctx)
		}
		cerr := srv.Close()
		cancel()
		<-shutdown
		if errors.Is(cerr, http.ErrServerClosed) {
			cerr = nil
		}
		return errors.Join(err, cerr)
	}
	return []Hook{
		{Name: name + ".stop_intake", Phase: StopIntake, Run: stop},
		{Name: name + ".wait_in_flight", Phase: WaitInFlight, Run: wait},
	}
}

// watchActive counts srv's connections that are reading a request or
// writing its response (http.StateActive), chaining any ConnState already set.
func watchActive(srv *http.Server) *Tracker {
	active := NewTracker()
	var conns sync.Map // net.Conn → struct{}: connections counted as active
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateActive {
			if _, loaded := conns.LoadOrStore(c, struct{}{}); !loaded {
				active.Begin()
			}
		} else if _, ok := conns.LoadAndDelete(c); ok {
			active.End()
		}
		if prev != nil {
			prev(c, s)
		}
	}
	return active
}

// GRPCHooks returns the two hooks that drain srv, which must have been built
// with t's [Tracker.ServerOptions] (interceptors and stats handler), so that
// an RPC counts until its response is written.
//
// StopIntake: intake is closed and GracefulStop begins: listeners close and
// clients are sent GOAWAY, so they pick another backend for new RPCs.
// Should the drain end (forced, or out of time) before WaitInFlight, the
// server is Stopped then.
//
// WaitInFlight: waits for GracefulStop, which returns once every RPC has
// finished and its answer is flushed. Long-lived streams that are not
// tracked, such as grpc.health.v1 Watch, do not hold it: closing intake
// ended them. At its deadline it Stops the server (cutting off what still
// runs) and returns the context's error at once; the GracefulStop
// goroutine ends when the last handler returns.
func GRPCHooks(name string, srv *grpc.Server, t *Tracker) []Hook {
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
	stop := func(ctx context.Context) error {
		t.CloseIntake()
		begin()
		context.AfterFunc(drainContext(ctx), srv.Stop) // forced or out of time before WaitInFlight: stop hard
		return nil
	}
	wait := func(ctx context.Context) error {
		t.CloseIntake() // in case StopIntake was skipped: also ends untracked streams
		begin()
		select {
		case <-stopped: // every RPC finished and was answered
			return nil
		case <-ctx.Done():
			// Stop closes every connection at once and does not wait for
			// handlers; GracefulStop (and its goroutine) still waits for a
			// handler that ignores its context, which is no reason to hold
			// the drain.
			srv.Stop()
			return ctx.Err()
		}
	}
	return []Hook{
		{Name: name + ".stop_intake", Phase: StopIntake, Run: stop},
		{Name: name + ".wait_in_flight", Phase: WaitInFlight, Run: wait},
	}
}
