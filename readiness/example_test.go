package readiness_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func Example() {
	st := newState(lifecycle.Running) // in a service: the lifecycle.Manager
	reg, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: quietLogger()}, st)
	if err != nil {
		panic(err)
	}
	defer reg.Close(context.Background())

	// The database gates readiness; the external IM service only reports.
	reg.Add(readiness.Check{Name: "mysql", Probe: func(context.Context) error { return nil }})
	reg.Add(readiness.Check{Name: "im", Tier: readiness.Informational,
		Probe: func(context.Context) error { return errors.New("im: 502") }})

	rep := reg.Ready(context.Background())
	fmt.Println(rep.Status, rep.Failed())

	st.set(lifecycle.Draining)
	rep = reg.Ready(context.Background())
	fmt.Println(rep.Status, rep.Reason)
	// Output:
	// degraded [im]
	// fail draining
}

func ExampleRegistry_Mount() {
	reg, _ := readiness.New(readiness.Config{Service: "gateway-service", NodeID: "gw-1", Logger: quietLogger()},
		newState(lifecycle.Starting))
	defer reg.Close(context.Background())
	mux := http.NewServeMux()
	reg.Mount(mux)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz/ready", nil))
	fmt.Println(rec.Code)
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz/live", nil))
	fmt.Println(rec.Code)
	// Output:
	// 503
	// 200
}

func ExampleRegistry_Heartbeat() {
	reg, _ := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: quietLogger()},
		newState(lifecycle.Running))
	defer reg.Close(context.Background())
	hb, _ := reg.Heartbeat("outbox", 5*time.Second)

	// In the outbox worker's loop:
	hb.Beat()

	fmt.Println(reg.Live().Status)
	// Output: ok
}

func ExampleRedisPing() {
	reg, _ := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: quietLogger()},
		newState(lifecycle.Running))
	defer reg.Close(context.Background())

	// A shared cache: report it, do not drain every replica when it degrades.
	cache := readiness.RedisPing(nil) // in a service: the redis client
	cache.Name, cache.Tier = "cache", readiness.Informational
	fmt.Println(cache.Name, cache.Tier, cache.Timeout)
	// Output: cache informational 200ms
}

func ExampleGRPCBridge() {
	st := newState(lifecycle.Starting)
	reg, _ := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: quietLogger()}, st)
	defer reg.Close(context.Background())

	bridge := readiness.NewGRPCBridge(reg)
	srv := grpc.NewServer()
	bridge.Register(srv)
	// With a lifecycle.Manager m:
	//	m.OnDrain(bridge.Drain)            // NOT_SERVING at the flip
	//	go bridge.Run(ctx)                 // SERVING once ready
	//	stop intake: bridge.Close(); srv.GracefulStop()
	status := func() {
		resp, _ := bridge.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "room-service"})
		fmt.Println(resp.Status)
	}
	status()
	st.set(lifecycle.Running)
	bridge.Update(context.Background())
	status()
	bridge.Drain()
	status()
	bridge.Close()
	srv.Stop()
	// Output:
	// NOT_SERVING
	// SERVING
	// NOT_SERVING
}
