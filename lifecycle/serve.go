package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/internal/configerr"
)

// Serve runs srv for the life of the process, under name; call it before
// [Manager.Run]. A start step listens on srv.Addr (":http" when empty), so
// an address that cannot be bound fails the start before Running. srv
// then serves in a goroutine that hook name+".serve" (phase close) waits
// for, after shutting srv down. Serve closes srv only at the end: an intake
// also adds drain.HTTPHooks(name, srv, m.Tracker()), which stop it after
// the delay; a server of probes does not, so liveness answers throughout.
// An empty name or a nil srv is refused with an error matching [ErrConfig].
func (m *Manager) Serve(name string, srv *http.Server) error {
	if name == "" {
		return configerr.Wrap(errors.New(`lifecycle: Serve: name is empty; want the server's name, such as "api"`))
	}
	if srv == nil {
		return configerr.Wrap(fmt.Errorf("lifecycle: Serve %q: srv is nil", name))
	}
	var listening atomic.Bool
	serveReturned := make(chan struct{}) // closed when srv.Serve returns
	shutdownSrv := func(ctx context.Context) error {
		if !listening.Load() {
			return nil // the start failed first: nothing serves
		}
		err := srv.Shutdown(ctx)
		select {
		case <-serveReturned:
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
		if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
			return nil // an intake's hooks closed it already
		}
		return err
	}
	hook := drain.Hook{Name: name + ".serve", Phase: drain.Close, Run: shutdownSrv, Abort: func() { _ = srv.Close() }}
	if err := m.AddHook(hook); err != nil {
		return err
	}
	m.OnStart(func(context.Context) error {
		addr := srv.Addr
		if addr == "" {
			addr = ":http" // as http.Server.ListenAndServe
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("serve %q: %w", name, err)
		}
		listening.Store(true)
		go func() {
			defer close(serveReturned)
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				m.log.Error("serve", "server", name, "err", err)
			}
		}()
		return nil
	})
	return nil
}
