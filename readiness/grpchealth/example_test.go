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
	// The gateway cannot serve without a room-service backend: gate on it.
	var conn grpc.ClientConnInterface // in a service: a *grpc.ClientConn
	c := grpchealth.Check(conn, "room-service")
	c.Name = "room_grpc"
	fmt.Println(c.Name, c.Tier, c.Timeout)
	// Output: room_grpc gating 300ms
}
