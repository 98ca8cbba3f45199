// Package fxgrpc serves gRPC in an fx app run by fxmodule.Run: RPCs
// counted until answered, grpc.health.v1 in step with readiness, the
// listener opened at start and drained in its phases. It is apart so that
// fxmodule does not link grpc-go for HTTP services.
//
// # Usage
//
//	fxmodule.Run(
//		fxmodule.Module, fxmodule.FromEnv, …,
//		fxgrpc.Server("grpc", ":13001", func(s *grpc.Server, rooms *Rooms) {
//			roompb.RegisterRoomsServer(s, rooms)
//		}),
//	)
//
// # Drain
//
// At the flip gRPC health answers NOT_SERVING, latched. At stop_intake the
// health Watch streams end, server streams are told and closed paced, and
// GracefulStop begins (GOAWAY; the RPCs that raced it are served for
// grpcdrain.Hooks' settle before intake closes); wait_in_flight waits for
// the RPCs in flight, release for the streams and GracefulStop, close for
// Serve. A drain cut short stops the server hard.
package fxgrpc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"google.golang.org/grpc"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/fxmodule/internal/listener"
	"github.com/drainkit/drainkit/fxmodule/internal/names"
	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/grpchealth"
)

// handshakeTimeout is the grpc.ConnectionTimeout fxgrpc gives a server:
// how long a new connection has to complete its handshake (TLS included)
// and send its HTTP/2 preface. grpc-go's GracefulStop and Stop wait for
// every connection still in its handshake, and its 120 s default let one
// client that connected and sent nothing hold a drain to its deadline.
const handshakeTimeout = 5 * time.Second

// Server serves gRPC on addr. register is an fx invoke function whose
// first parameter is the *grpc.Server (the others come from the graph): it
// registers the service's implementations. The server is built with
// grpcdrain.ServerOptions and opts, serves grpc.health.v1 for the
// registry's service name, gives a connection 5 s to complete its
// handshake (grpc.ConnectionTimeout; in opts to change it: later options
// win), and registers server streams with a
// drain.Streams named name+".streams" (default pacing); register may take
// that *drain.Streams too, for handlers that say goodbye at its Told. It adds the drain
// hooks name+".stop_intake", ".health_watch", ".wait_in_flight",
// ".graceful_stop" and ".serve", the streams' hooks, and the gating check
// name+"_listener". An empty name or one another server has, a malformed
// addr, a nil register or a func without a *grpc.Server is refused before
// anything starts (exit 78).
func Server(name, addr string, register any, opts ...grpc.ServerOption) fx.Option {
	option := fmt.Sprintf("fxgrpc.Server(%q, %q, …)", name, addr)
	if err := names.EmptyServerName(option, name); err != nil {
		return fx.Error(err)
	}
	if err := checkRegister(register); err != nil {
		return fx.Error(configerr.Errorf("fxgrpc: Server(%q, %q, register): %w", name, addr, err))
	}
	if err := listener.CheckAddr(addr); err != nil {
		return fx.Error(configerr.Errorf("fxgrpc: Server(%q, %q, …): %w", name, addr, err))
	}
	return fx.Module("drainkit.grpc."+name,
		fx.Provide(fx.Private, func(p serverParams) (*grpc.Server, *drain.Streams, error) {
			if p.Manager == nil {
				return nil, nil, names.NeedModule(option)
			}
			if err := p.Names.CheckServer(name, option); err != nil {
				return nil, nil, err // before the streams' metrics, which a second server of this name would register again
			}
			streams, err := drain.NewStreams(drain.StreamsConfig{Name: name + ".streams", Registerer: p.Registerer})
			if err != nil {
				return nil, nil, fmt.Errorf("fxgrpc: server %q: %w", name, err)
			}
			base := append(grpcdrain.ServerOptions(p.Manager.Tracker(), streams), grpc.ConnectionTimeout(handshakeTimeout))
			return grpc.NewServer(append(base, opts...)...), streams, nil
		}),
		fx.Invoke(register),
		fx.Invoke(func(p params) error { return serve(name, addr, option, p) }),
	)
}

// checkRegister refuses a nil register (fx's words would not name the
// option) and a func that cannot be given the server: no *grpc.Server
// parameter, nor a struct one (an fx.In may hold it). Anything else, an
// fx.Annotate of a func included, is fx's to judge.
func checkRegister(register any) error {
	if register == nil {
		return errors.New("register is nil; want a func whose first parameter is *grpc.Server")
	}
	t := reflect.TypeOf(register)
	if t.Kind() != reflect.Func {
		return nil
	}
	for i := range t.NumIn() {
		if in := t.In(i); in == reflect.TypeFor[*grpc.Server]() || in.Kind() == reflect.Struct {
			return nil
		}
	}
	return fmt.Errorf("register is a %s; want a func whose first parameter is *grpc.Server", t)
}

type serverParams struct {
	fx.In
	Manager    *lifecycle.Manager    `optional:"true"` // nil without fxmodule.Module: see names.NeedModule
	Names      *names.Owners         `optional:"true"` // with the Manager
	Registerer prometheus.Registerer `optional:"true"`
}

type params struct {
	fx.In
	Lifecycle fx.Lifecycle
	Manager   *lifecycle.Manager
	Registry  *readiness.Registry
	Server    *grpc.Server
	Streams   *drain.Streams
	Names     *names.Owners
	Logger    *slog.Logger `optional:"true"`
}

func serve(name, addr, option string, p params) error {
	log := cmp.Or(p.Logger, slog.Default()).With("service", p.Manager.Config().Service) // as on lifecycle's lines
	health, err := grpchealth.NewServer(p.Registry)
	if err != nil {
		return err
	}
	health.Register(p.Server)
	p.Manager.OnTransition(health.OnTransition) // SERVING from Running on, NOT_SERVING at the flip, latched

	var (
		bound      listener.Bound
		wg         sync.WaitGroup                     // Serve and the health loop
		stopHealth atomic.Pointer[context.CancelFunc] // set at the start
	)
	waitServe := func(ctx context.Context) error {
		if stop := stopHealth.Load(); stop != nil {
			(*stop)()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	hooks := append(grpcdrain.Hooks(name, p.Server, p.Manager.Tracker()),
		drain.Hook{Name: name + ".health_watch", Phase: drain.StopIntake, Run: func(context.Context) error {
			health.Close() // before GracefulStop waits for every stream, a prober's Watch included
			return nil
		}},
		drain.Hook{Name: name + ".serve", Phase: drain.Close, Run: waitServe},
	)
	hooks = append(hooks, p.Streams.Hooks()...)
	if err := p.Names.AddServer(p.Manager, name, option, hooks...); err != nil {
		return err
	}
	if err := p.Registry.Add(bound.Check(name+"_listener", addr)); err != nil {
		return err
	}
	p.Lifecycle.Append(fx.Hook{OnStart: func(context.Context) error {
		ln, err := bound.Listen(addr)
		if err != nil {
			return fmt.Errorf("fxgrpc: server %q: listen on %s: %w", name, addr, err)
		}
		a := ln.Addr().String()
		ctx, stop := context.WithCancel(context.Background())
		stopHealth.Store(&stop)
		wg.Go(func() { _ = health.Run(ctx) })
		wg.Go(func() {
			// ErrServerStopped: the drain stopped the server before Serve
			// began (a start rolled back); nothing was lost.
			if err := p.Server.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				log.Error("serve", "server", name, "err", err)
			}
		})
		// The name a prober asks grpc.health.v1 for (grpc-health-probe's
		// -service, a Kubernetes grpc probe's service); "" answers the same.
		log.Info("listening", "server", name, "addr", a, "health_service", p.Registry.Config().Service)
		return nil
	}})
	return nil
}
