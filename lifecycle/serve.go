package lifecycle

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/internal/serve"
)

// Serve runs srv for the life of the process, under name; call it before
// [Manager.Run]. A start step listens on srv.Addr (":http" when empty), so
// an address that cannot be bound fails the start before Running. srv
// then serves in a goroutine; hook name+".serve" (phase close) shuts it
// down and waits for that goroutine. So the listener is open until phase
// close and probes mounted on srv answer through the whole drain. Serve
// adds no other hook: for a server that takes traffic, add
// drain.HTTPHooks(name, srv, m.Tracker()) yourself, or requests are
// neither refused from stop_intake nor waited for before Flush. An empty
// name or a nil srv is refused with an error matching [ErrConfig].
func (m *Manager) Serve(name string, srv *http.Server) error {
	if name == "" {
		return configerr.Errorf(`lifecycle: Serve: name is empty; want the server's name, such as "api"`)
	}
	if srv == nil {
		return configerr.Errorf("lifecycle: Serve %q: srv is nil", name)
	}
	s := serve.NewHTTP(name, srv, m.log)
	if err := m.AddHook(s.Hook()); err != nil {
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
		s.Serve(ln)
		return nil
	})
	return nil
}
