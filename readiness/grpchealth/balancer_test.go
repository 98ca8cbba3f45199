package grpchealth_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/health" // enables client-side health checking
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// whoServer answers /test.Who/Name with its backend's name; a request
// "block" waits on release, standing in for a long RPC in flight.
type whoServer struct {
	name    string
	started chan struct{}
	release chan struct{}
}

func (s *whoServer) answer(ctx context.Context, req *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	if req.Value == "block" && s.release != nil {
		close(s.started)
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return wrapperspb.String(s.name), nil
}

var whoDesc = grpc.ServiceDesc{
	ServiceName: "test.Who",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Name",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return srv.(*whoServer).answer(ctx, in)
		},
	}},
}

func callWho(ctx context.Context, conn *grpc.ClientConn, req string) (string, error) {
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, "/test.Who/Name", wrapperspb.String(req), out)
	return out.Value, err
}

// TestClientStopsPickingDrainedBackend uses grpc-go's own client-side health
// checking (round_robin + healthCheckConfig) over two real backends: at A's
// flip the client stops picking A, while a call already in flight on A
// finishes normally.
func TestClientStopsPickingDrainedBackend(t *testing.T) {
	whoA := &whoServer{name: "a", started: make(chan struct{}), release: make(chan struct{})}
	whoB := &whoServer{name: "b"}
	a := startBackend(t, func(s grpc.ServiceRegistrar) { s.RegisterService(&whoDesc, whoA) })
	b := startBackend(t, func(s grpc.ServiceRegistrar) { s.RegisterService(&whoDesc, whoB) })
	a.ready(t)
	b.ready(t)

	r := manual.NewBuilderWithScheme("drainkit")
	r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: a.addr}, {Addr: b.addr}}})
	conn := dial(t, r.Scheme()+":///room-service", grpc.WithResolvers(r), grpc.WithDefaultServiceConfig(
		`{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":"room-service"}}`))

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// Until both backends are healthy in the client's eyes, calls may all
	// land on one: wait until both have answered.
	seen := map[string]bool{}
	for !seen["a"] || !seen["b"] {
		name, err := callWho(ctx, conn, "")
		require.NoError(t, err, "call before the flip")
		seen[name] = true
	}

	// Put a long call in flight on A (round robin sends every other call there).
	inflight := make(chan error, 1)
	go func() {
		for {
			name, err := callWho(ctx, conn, "block")
			if err != nil || name == "a" {
				inflight <- err
				return
			}
		}
	}()
	<-whoA.started

	a.drain()
	// The client learns of the flip over its Watch stream; once it has, no
	// call goes to A. Count consecutive calls on B.
	for onB := 0; onB < 50; {
		name, err := callWho(ctx, conn, "")
		require.NoError(t, err, "call after the flip: want calls to go to b")
		if name == "b" {
			onB++
		} else {
			onB = 0
		}
	}
	for range 200 {
		name, err := callWho(ctx, conn, "")
		require.NoError(t, err, "call after the client saw the flip")
		require.Equal(t, "b", name, "call after the client saw the flip went to")
	}

	select {
	case err := <-inflight:
		require.Failf(t, "in-flight call on a ended early", "error %v; want it still running", err)
	default:
	}
	close(whoA.release)
	assert.NoError(t, <-inflight, "in-flight call on a: want it to finish normally")
}
