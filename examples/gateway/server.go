package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/grpchealth"
)

// server is the gateway's HTTP server: the API, tracked in flight by the
// drain, and the health endpoints, which are not (a probe on a kept-alive
// connection still gets a JSON answer after intake closes).
type server struct {
	cfg    Config
	srv    *http.Server
	notice func(addr string)

	addr   atomic.Pointer[string] // bound address once listening
	served chan struct{}          // closed when Serve returns
}

// newServer builds the *http.Server before anything serves, so that
// drain.HTTPHooks can wrap its ConnState.
func newServer(cfg Config, a *api, ev *events, reg *readiness.Registry, t *drain.Tracker, notice func(addr string)) *server {
	mux := http.NewServeMux()
	reg.Mount(mux)
	mux.Handle("/api/", t.Middleware(a.routes()))
	mux.Handle(eventsRoute, t.Middleware(ev))
	return &server{
		cfg:    cfg,
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		notice: notice,
		served: make(chan struct{}),
	}
}

// Start listens and serves in a goroutine that the drain's http hooks end
// and [server.wait] waits for.
func (s *server) Start(context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		close(s.served)
		return err
	}
	addr := ln.Addr().String()
	s.addr.Store(&addr)
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // ErrServerClosed once the drain closes it
	}()
	s.notice(addr)
	return nil
}

// hooks are the server's drain hooks: stop intake, wait for in-flight
// requests (drain.HTTPHooks), and in the Close phase wait for Serve to return.
func (s *server) hooks(t *drain.Tracker) []drain.Hook {
	return append(drain.HTTPHooks("http", s.srv, t),
		drain.Hook{Name: "http.serve", Phase: drain.Close, Run: s.wait})
}

func (s *server) wait(ctx context.Context) error {
	if s.addr.Load() == nil {
		return nil // never started
	}
	select {
	case <-s.served:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errNotListening = errors.New("gateway: HTTP listener not up")

// listenerCheck is the gating "http_listener" check: the bound listener
// accepts a connection.
func (s *server) listenerCheck() readiness.Check {
	c := readiness.Listener("")
	c.Name = "http_listener"
	c.Probe = func(ctx context.Context) error {
		addr := s.addr.Load()
		if addr == nil {
			return errNotListening
		}
		return readiness.Listener(*addr).Probe(ctx)
	}
	return c
}

// roomCheck is the gating "room_grpc" check (the guide's name): a
// grpc.health.v1 Check for room-service through the balanced connection,
// which round_robin sends only to a backend it has seen SERVING, so it
// fails while no backend is.
func (b *backends) roomCheck() readiness.Check {
	c := grpchealth.Check(nil, HealthService)
	c.Name = "room_grpc"
	c.Probe = func(ctx context.Context) error {
		conn := b.conn()
		if conn == nil {
			return errNotStarted
		}
		return grpchealth.Check(conn, HealthService).Probe(ctx)
	}
	return c
}
