package grpchealth_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/grpchealth"
)

func TestCheckDefaults(t *testing.T) {
	tests := []struct {
		give     string
		wantName string
	}{
		{"room-service", "room-service"},
		{"", "grpc"},
	}
	for _, tt := range tests {
		c := grpchealth.Check(nil, tt.give)
		assert.Equal(t, tt.wantName, c.Name, "Check(%q)", tt.give)
		assert.Equal(t, 300*time.Millisecond, c.Timeout, "Check(%q)", tt.give)
		assert.Equal(t, readiness.Informational, c.Tier, "Check(%q)", tt.give)
	}
}

// A caller's readiness never follows a downstream tier's: while one of two
// room-services drains, the gateway's Check RPCs on a balanced conn reach
// it every other probe, and a gating Check failed half the gateway's ready
// probes on every rolling update of room-service.
func TestCheckKeepsTheCallerReadyWhileOneDownstreamReplicaDrains(t *testing.T) {
	a, b := startBackend(t), startBackend(t)
	a.ready(t)
	b.ready(t)
	r := manual.NewBuilderWithScheme("drainkit-check")
	r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: a.addr}, {Addr: b.addr}}})
	conn := dial(t, r.Scheme()+":///room-service", grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))

	gw, err := readiness.New(readiness.Config{Service: "gateway-service", NodeID: "gw-1",
		CacheTTL: time.Nanosecond, Logger: quietLogger()}, newState(lifecycle.Running).State)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, gw.Close(context.Background())) })
	require.NoError(t, gw.Add(grpchealth.Check(conn, "room-service")))

	a.drain() // a rolling update of room-service: a leaves, b serves
	for i := range 20 {
		rep := gw.Ready(t.Context())
		require.NotEqual(t, readiness.StatusFail, rep.Status, "probe %d while one of two room-services drains: %+v", i, rep.Checks)
	}
	b.drain() // every room-service out (a dependency they all share): reported, not gated on
	rep := gw.Ready(t.Context())
	assert.Equal(t, readiness.StatusDegraded, rep.Status, "with every room-service NOT_SERVING: %+v", rep.Checks)
	assert.Equal(t, readiness.StatusFail, rep.Checks[0].Status, "the check, with every room-service NOT_SERVING")
}
