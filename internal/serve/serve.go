// Package serve is drainkit's one way to run an *http.Server for a drain:
// serve a listener opened at the start in a goroutine, and in phase close
// shut the server down and wait for Serve to return.
// lifecycle.Manager.Serve, fxmodule.HTTP and fxmodule.Admin use it; what
// drains an intake (503 from stop_intake on, the wait for in-flight
// requests) is drain.HTTPHooks, beside it.
package serve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/drainkit/drainkit/drain"
)

// HTTP is one server's serve goroutine and its close-phase hook.
type HTTP struct {
	name      string
	srv       *http.Server
	log       *slog.Logger
	listening atomic.Bool
	returned  chan struct{} // closed when srv.Serve returns
}

// NewHTTP returns the serving of srv under name, logging to log.
func NewHTTP(name string, srv *http.Server, log *slog.Logger) *HTTP {
	return &HTTP{name: name, srv: srv, log: log, returned: make(chan struct{})}
}

// Serve serves ln in a goroutine that ends when the server is shut down
// or closed. Call it once, from a start step.
func (s *HTTP) Serve(ln net.Listener) {
	s.listening.Store(true)
	go func() {
		defer close(s.returned)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serve", "server", s.name, "err", err)
		}
	}()
}

// Hook is name+".serve", of phase close: it shuts the server down
// (closing the listener, waiting for active connections) and waits for
// Serve to return. A server that never served (the start failed first)
// has nothing to wait for; one already closed (an Abort) is not an error.
func (s *HTTP) Hook() drain.Hook {
	return drain.Hook{Name: s.name + ".serve", Phase: drain.Close, Run: s.shutdown, Abort: func() { _ = s.srv.Close() }}
}

func (s *HTTP) shutdown(ctx context.Context) error {
	if !s.listening.Load() {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if ctx.Err() != nil {
		_ = s.srv.Close() // the deadline: cut what is still active
	}
	select {
	case <-s.returned:
	case <-ctx.Done():
		return errors.Join(err, ctx.Err())
	}
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
