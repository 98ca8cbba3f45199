package grpcdrain_test

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/grpcdrain"
)

// A server built with ServerOptions counts its RPCs in the tracker; Hooks
// drains it: GOAWAY at StopIntake, in-flight RPCs answered in WaitInFlight.
func ExampleHooks() {
	var t drain.Tracker
	srv := grpc.NewServer(grpcdrain.ServerOptions(&t)...)
	// Register services here.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = srv.Serve(ln) }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	report := drain.Run(ctx, "shutdown", grpcdrain.Hooks("grpc", srv, &t))
	_ = report.Err()
}
