package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/connectivity"

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
func newServer(cfg Config, a *api, ev *events, reg *readiness.Registry, t *drain.Tracker, pr *prometheus.Registry, notice func(addr string)) *server {
	mux := http.NewServeMux()
	reg.Mount(mux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(pr, promhttp.HandlerOpts{}))
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

var errNotServing = errors.New("gateway: HTTP server stopped serving")

// listenerCheck is the gating "http_listener" check: the listener is bound
// and the server serves it. It reads that state rather than dialling the
// listener: a dial within the usual 100 ms listener budget measures how busy the
// machine is, and when a fault ends and a backlog of held requests is
// answered at once, it timed out on a small machine and took every
// gateway out of the balancer at the moment they had work to finish.
func (s *server) listenerCheck() readiness.Check {
	return readiness.Check{Name: "http_listener", Tier: readiness.Gating, Timeout: readiness.DefaultListenerTimeout,
		Probe: func(context.Context) error {
			if s.addr.Load() == nil {
				return errNotListening
			}
			select {
			case <-s.served:
				return errNotServing
			default:
				return nil
			}
		}}
}

// roomCheck is the gating "room_grpc" check: the
// room-service gRPC address is connectable, i.e. grpc-go holds a
// connection to some configured address (for a dns:/// target, some
// address the name resolves to) on a balanced connection that requests do
// not use and that has no health check. It reads the connection's state,
// kept up by grpc-go's reconnects, rather than dialling per probe, for the
// reason listenerCheck gives. It deliberately does not ask whether a
// room-service is SERVING: room-service turns not ready when a dependency
// all its replicas share (Redis) fails, and a gateway following it would
// take every gateway out of the balancer at once. The gateway instead
// holds requests within their deadline until a room-service is ready again.
func (b *backends) roomCheck() readiness.Check {
	return readiness.Check{Name: "room_grpc", Tier: readiness.Gating, Timeout: readiness.DefaultCheckTimeout,
		Probe: func(context.Context) error {
			conn := b.reach.Load()
			if conn == nil {
				return errNotStarted
			}
			switch st := conn.GetState(); st {
			case connectivity.Ready:
				return nil
			default:
				conn.Connect() // leaves Idle; a no-op otherwise
				return fmt.Errorf("gateway: no room-service address connectable (connection %s)", st)
			}
		}}
}
