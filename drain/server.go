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
// to learn when each response has been written out. StopIntake closes
// intake (later requests get 503), turns keep-alives off and closes the
// listeners and idle connections. WaitInFlight waits, notified rather than
// polling, for t and every response, then closes the idle connections, or
// every connection at its deadline. Hijacked connections are neither waited
// for nor closed. Both hooks' Abort closes srv; the application may call
// srv.Shutdown or srv.Close itself at any time.
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

// closeListeners is srv.Shutdown with a context already ended: it closes
// the listeners and idle connections once and returns rather than poll
// for the active ones, which the server then closes after their response.
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
