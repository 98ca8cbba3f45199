package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/readiness"
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
func newServer(cfg Config, a *api, reg *readiness.Registry, t *drain.Tracker, pr *prometheus.Registry, notice func(addr string)) *server {
	mux := http.NewServeMux()
	reg.Mount(mux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(pr, promhttp.HandlerOpts{}))
	mux.Handle("/api/", t.Middleware(a.routes()))
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

// roomCheck is the gating "room_grpc" check (the guide's name): the
// room-service gRPC address is connectable, i.e. some configured address
// accepts a TCP connection (for a dns:/// target, the name resolves to
// one that does). It deliberately does not ask whether a room-service is
// SERVING: room-service turns not ready when a dependency all its replicas
// share (Redis) fails, and a gateway following it would take every gateway
// out of the balancer at once. The gateway instead holds requests within
// their deadline until a room-service is ready again.
func (b *backends) roomCheck() readiness.Check {
	addrs := b.cfg.Backends
	if b.cfg.DNSTarget != "" {
		addrs = []string{strings.TrimPrefix(b.cfg.DNSTarget, "dns:///")}
	}
	return readiness.Check{Name: "room_grpc", Tier: readiness.Gating, Timeout: roomCheckTimeout,
		Probe: func(ctx context.Context) error { return anyConnectable(ctx, addrs) }}
}

// roomCheckTimeout bounds the room_grpc check: the guide's budget for a
// downstream gRPC service.
const roomCheckTimeout = 300 * time.Millisecond

// anyConnectable dials every address at once and returns nil as soon as
// one accepts a TCP connection, or every dial's error.
func anyConnectable(ctx context.Context, addrs []string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(addrs))
	for _, a := range addrs {
		go func() {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", a)
			if err == nil {
				err = c.Close()
			}
			errs <- err
		}()
	}
	var all []error
	for range addrs {
		if err := <-errs; err == nil {
			return nil // the deferred cancel ends the other dials; each sends to the buffered channel
		} else {
			all = append(all, err)
		}
	}
	return fmt.Errorf("no room-service address connectable: %w", errors.Join(all...))
}
