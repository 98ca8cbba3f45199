package drain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// HTTPHooks returns the three hooks that drain srv, whose handler must be
// wrapped by t.Middleware. Call it before srv.Serve: it wraps srv.ConnState
// to learn when each response has been written out.
//   - name+".stop_intake" closes intake: later requests get 503 with
//     Retry-After and Connection: close, and keep-alives are turned off
//     (idle connections closed) so clients reconnect elsewhere. The
//     listener stays open, so what the handler does not wrap (probes)
//     is still answered, and requests that arrive late are counted.
//   - name+".wait_in_flight" waits, notified rather than polling, for t
//     and for every response to be written out.
//   - name+".close" (phase close) waits, notified, until no response is
//     being written, then closes srv and its listener; at the deadline it
//     closes srv at once.
//
// Hijacked connections are neither waited for nor closed. Every hook's
// Abort closes srv. docs/shutdown.md says what a balancer that retries
// only refused connections sees, and why DRAIN_DELAY is the remedy. An
// empty name, a nil srv or a nil t panics, naming it.
func HTTPHooks(name string, srv *http.Server, t *Tracker) []Hook {
	switch {
	case name == "":
		panic(`drain: HTTPHooks: name is empty; want the server's name, such as "api"`)
	case srv == nil:
		panic(fmt.Sprintf("drain: HTTPHooks(%q): srv is nil", name))
	case t == nil:
		panic(fmt.Sprintf("drain: HTTPHooks(%q): t is nil; want the manager's Tracker", name))
	}
	active := watchActive(srv)
	abort := func() { _ = srv.Close() }
	stop := func(context.Context) error {
		t.CloseIntake()
		srv.SetKeepAlivesEnabled(false)
		return nil
	}
	wait := func(ctx context.Context) error {
		_ = stop(ctx) // in case StopIntake was skipped
		if err := t.Wait(ctx); err != nil {
			return err
		}
		return active.Wait(ctx)
	}
	// Not srv.Shutdown, which polls for idle connections on a schedule
	// that grows to 500 ms: wait, notified, until no response is being
	// written (probes included), then close. At ctx's end, close anyway.
	closeSrv := func(ctx context.Context) error {
		err := active.Wait(ctx)
		if cerr := srv.Close(); cerr != nil && !errors.Is(cerr, http.ErrServerClosed) {
			err = errors.Join(err, cerr)
		}
		return err
	}
	return []Hook{
		{Name: name + ".stop_intake", Phase: StopIntake, Run: stop, Abort: abort},
		{Name: name + ".wait_in_flight", Phase: WaitInFlight, Run: wait, Abort: abort},
		{Name: name + ".close", Phase: Close, Run: closeSrv, Abort: abort},
	}
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
