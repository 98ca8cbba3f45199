package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// It answers UnaryCall and health until its context ends, then stops
// gracefully: run returns nil, and the listener is gone at once (the drill
// shows what that costs behind a Service).
func TestServesThenStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	listening := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, "127.0.0.1:0", slog.New(slog.DiscardHandler), listening) }()
	addr := <-listening
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	resp, err := testgrpc.NewTestServiceClient(conn).UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("hi")}})
	require.NoError(t, err)
	assert.Equal(t, "hi", string(resp.GetPayload().GetBody()))
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.GetStatus())

	cancel()
	require.NoError(t, <-errc)
	_, err = testgrpc.NewTestServiceClient(conn).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err), "stopped: %v", err)
}
