package drain

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
)

// HTTPHooks returns the two hooks that drain srv, whose handler must be
// wrapped by t.Middleware. Call it before srv.Serve: it wraps srv.ConnState
// to know when each response has been written out, which the handler's
// return alone does not tell (the server flushes after the handler).
//
// StopIntake: intake is closed (later requests on kept-alive connections get
// 503 and Connection: close), keep-alives are turned off, the listeners and
// idle connections are closed, and the hook returns.
//
// WaitInFlight: waits for t to reach zero and for every response to be
// written, then closes every remaining (idle) connection at once. It does
// not poll like http.Server.Shutdown, whose schedule grows to 500 ms: the
// drain moves on within a millisecond of the last request ending. At its
// deadline it closes every connection, in-flight or not, and returns the
// context's error. Hijacked connections (WebSockets) are neither waited for
// nor closed, as with Shutdown.
//
// Both hooks carry an Abort that closes srv, so a drain cut short (forced,
// or out of time) before WaitInFlight ran still closes every connection.
// The application may call srv.Shutdown or srv.Close itself, before or
// during the drain, as often as it likes: every step is idempotent.
func HTTPHooks(name string, srv *http.Server, t *Tracker) []Hook {
	active := watchActive(srv)
	abort := func() { _ = srv.Close() }
	stop := func(context.Context) error {
		t.CloseIntake()
		srv.SetKeepAlivesEnabled(false)
		return closeListeners(srv)
	}
	wait := func(ctx context.Context) error {
		err := stop(ctx) // in case StopIntake was skipped or failed
		if err == nil {
			err = t.Wait(ctx)
		}
		if err == nil {
			err = active.Wait(ctx)
		}
		cerr := srv.Close()
		if errors.Is(cerr, http.ErrServerClosed) {
			cerr = nil
		}
		return errors.Join(err, cerr)
	}
	return []Hook{
		{Name: name + ".stop_intake", Phase: StopIntake, Run: stop, Abort: abort},
		{Name: name + ".wait_in_flight", Phase: WaitInFlight, Run: wait, Abort: abort},
	}
}

// closeListeners closes srv's listeners and idle connections and returns
// without waiting for the active ones. It is http.Server.Shutdown with a
// context that has already ended: Shutdown closes the listeners, waits for
// Serve to leave them, closes the idle connections once, and returns the
// context's error instead of polling while requests are still active. From
// then on the server closes each connection after its current response.
// Shutdown is idempotent, so the application may call it too.
func closeListeners(srv *http.Server) error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// watchActive counts srv's connections that are reading a request or
// writing its response (http.StateActive), chaining any ConnState already set.
func watchActive(srv *http.Server) *Tracker {
	active := new(Tracker)
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
