package grpchealth_test

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/grpchealth"
)

func ExampleServer() {
	st := newState(lifecycle.Starting) // in a service: the lifecycle.Manager m
	reg, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1"}, st.State)
	if err != nil {
		panic(err)
	}
	defer reg.Close(context.Background())

	srv := grpc.NewServer()
	health, err := grpchealth.NewServer(reg)
	if err != nil {
		panic(err)
	}
	health.Register(srv)
	// With a lifecycle.Manager m: SERVING from the flip to Running on,
	// NOT_SERVING from the drain's, latched.
	//	m.OnTransition(health.OnTransition)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go health.Run(ctx) // SERVING once the process is ready
	// At stop intake, end Watch streams so that GracefulStop does not wait
	// for probers:
	health.Close()
	srv.GracefulStop()
}

func ExampleCheck() {
	// The gateway reports whether room-service serves; it does not gate on
	// it, or a Redis outage of every room-service would empty the gateways'
	// balancer too.
	var conn grpc.ClientConnInterface // in a service: a *grpc.ClientConn
	c := grpchealth.Check(conn, "room-service")
	c.Name = "room_service_serving"
	fmt.Println(c.Name, c.Tier, c.Timeout)
	// Output: room_service_serving informational 300ms
}
