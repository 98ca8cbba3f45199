package grpchealth_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/internal/harness"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/grpchealth"
)

// backend is a real gRPC server on loopback serving grpchealth.
type backend struct {
	addr   string
	state  *state
	reg    *readiness.Registry
	health *grpchealth.Server
	srv    *grpc.Server
	served chan struct{} // closed when Serve returns
}

// startBackend serves the health server and any services register adds.
func startBackend(t *testing.T, register ...func(grpc.ServiceRegistrar)) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &backend{addr: ln.Addr().String(), state: newState(lifecycle.Starting), served: make(chan struct{})}
	b.reg = newRegistry(t, b.state)
	b.health = newServer(t, b.reg)
	b.srv = grpc.NewServer()
	b.health.Register(b.srv)
	for _, reg := range register {
		reg(b.srv)
	}
	go func() { defer close(b.served); b.srv.Serve(ln) }()
	t.Cleanup(func() { b.srv.Stop(); <-b.served })
	return b
}

// ready moves the backend to Running and lets the health server see it.
func (b *backend) ready(t *testing.T) {
	b.state.set(lifecycle.Running)
	b.health.Update(t.Context())
}

// drain flips the backend the way the lifecycle manager does: state first,
// then the listener of the transition to Draining.
func (b *backend) drain() {
	b.state.set(lifecycle.Draining)
	b.health.Drain()
}

func dial(t *testing.T, target string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// connected returns conn once it is connected (grpc.NewClient dials on
// first use), or fails the test when the test's context ends first.
func connected(t *testing.T, conn *grpc.ClientConn) *grpc.ClientConn {
	t.Helper()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		require.True(t, conn.WaitForStateChange(t.Context(), s), "connecting to %s: still %s when the test ended", conn.Target(), s)
	}
	return conn
}

func healthStatus(t *testing.T, conn *grpc.ClientConn, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
	require.NoError(t, err, "Check(%q)", service)
	return resp.Status
}

func TestServerStates(t *testing.T) {
	b := startBackend(t)
	conn := dial(t, b.addr)
	want := func(step string, s healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for _, svc := range []string{"room-service", ""} {
			assert.Equal(t, s, healthStatus(t, conn, svc), "%s: Check(%q)", step, svc)
		}
	}
	want("before the first update", healthpb.HealthCheckResponse_UNKNOWN)
	b.health.Update(t.Context())
	want("starting", healthpb.HealthCheckResponse_UNKNOWN) // the service guide's status while starting
	b.ready(t)
	want("ready", healthpb.HealthCheckResponse_SERVING)
	b.drain()
	want("draining", healthpb.HealthCheckResponse_NOT_SERVING)
	// An evaluation racing the flip cannot bring SERVING back.
	b.state.set(lifecycle.Running)
	b.health.Update(t.Context())
	want("update after drain", healthpb.HealthCheckResponse_NOT_SERVING)
}

func TestRunStopsAtDrain(t *testing.T) {
	b := startBackend(t)
	conn := dial(t, b.addr)
	b.state.set(lifecycle.Running)
	done := make(chan error)
	go func() { done <- b.health.Run(context.Background()) }()
	// Run updates at once, then every CacheTTL/10; wait for the first update.
	w, err := healthpb.NewHealthClient(conn).Watch(t.Context(), &healthpb.HealthCheckRequest{Service: "room-service"})
	require.NoError(t, err)
	for {
		resp, err := w.Recv()
		require.NoError(t, err)
		if resp.Status == healthpb.HealthCheckResponse_SERVING {
			break
		}
	}
	b.drain()
	assert.NoError(t, <-done, "Run after Drain")
}

func TestCheck(t *testing.T) {
	b := startBackend(t)
	// Connected first: the check's 300 ms are for the Check RPC, and a
	// first dial on a loaded machine can take longer than that.
	conn := connected(t, dial(t, b.addr))
	c := grpchealth.Check(conn, "room-service")
	assert.ErrorContains(t, runCheck(t, c), "UNKNOWN", "starting downstream")
	b.ready(t)
	assert.NoError(t, runCheck(t, c), "ready downstream")
}

// TestCloseEndsWatch shows why Close exists: health.Server.Shutdown
// leaves Watch streams open, and GracefulStop waits for open streams. This
// watcher is a raw stream that, unlike grpc-go's health producer, does not
// cancel itself on GOAWAY.
func TestCloseEndsWatch(t *testing.T) {
	b := startBackend(t)
	b.ready(t)
	w, err := healthpb.NewHealthClient(dial(t, b.addr)).Watch(t.Context(), &healthpb.HealthCheckRequest{Service: "room-service"})
	require.NoError(t, err)
	recv := func() healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := w.Recv()
		require.NoError(t, err, "Recv")
		return resp.Status
	}
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, recv(), "first watch status")
	b.drain()
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, recv(), "watch status after drain")
	b.health.Close()
	_, err = w.Recv()
	assert.Error(t, err, "Recv after Close: want the stream ended")
	stopped := make(chan struct{})
	go func() { b.srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second): // a hang, not a timing assertion
		require.FailNow(t, "GracefulStop still waiting 10s after Close; want Watch streams ended")
	}
	// A watch arriving late fails at once rather than holding the server.
	late := startBackend(t)
	late.health.Close()
	lw, err := healthpb.NewHealthClient(dial(t, late.addr)).Watch(t.Context(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = lw.Recv()
	assert.Equal(t, codes.Unavailable, status.Code(err), "Watch after Close (%v)", err)
}

func TestHealthProbeBinary(t *testing.T) {
	bin, err := harness.HealthProbe()
	require.NoError(t, err)
	b := startBackend(t)
	// grpc-health-probe exits 0 when SERVING and 4 when not.
	probe := func(step, service string, wantExit int) {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), bin, "-addr="+b.addr, "-service="+service).CombinedOutput()
		exit := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			exit = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		assert.Equal(t, wantExit, exit, "%s: grpc-health-probe -service=%q exit code (%s)", step, service, out)
	}
	probe("starting", "room-service", 4)
	b.ready(t)
	probe("ready", "room-service", 0)
	probe("ready, whole server", "", 0)
	b.drain()
	probe("draining", "room-service", 4)
	probe("draining, whole server", "", 4)
}

// A nil registry is refused by the constructor and a nil registrar panics
// where it is given, naming the argument, not at the first probe or RPC.
func TestNewServerRefusesAndRegisterPanicsOnNil(t *testing.T) {
	h, err := grpchealth.NewServer(nil)
	assert.EqualError(t, err, "grpchealth: NewServer: reg is nil", "NewServer(nil)")
	assert.Nil(t, h, "NewServer(nil)")
	h = newServer(t, newRegistry(t, newState(lifecycle.Starting)))
	assert.PanicsWithValue(t, "grpchealth: Register: r is nil", func() { h.Register(nil) }, "Register(nil)")
}

// newServer is grpchealth.NewServer for a registry that is never nil.
func newServer(t *testing.T, reg *readiness.Registry) *grpchealth.Server {
	t.Helper()
	h, err := grpchealth.NewServer(reg)
	require.NoError(t, err, "NewServer")
	return h
}

// A registry answering for Draining latches NOT_SERVING by itself, read
// from the report's typed State: a bridge whose Drain nobody called (no
// transition listener) still stops serving at the flip, for good.
func TestUpdateLatchesDrainingFromTheReportsState(t *testing.T) {
	b := startBackend(t)
	conn := dial(t, b.addr)
	b.ready(t)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, healthStatus(t, conn, ""))
	b.state.set(lifecycle.Draining)
	b.health.Update(t.Context())
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, healthStatus(t, conn, ""), "after the flip")
	b.state.set(lifecycle.Running)
	b.health.Update(t.Context())
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, healthStatus(t, conn, ""), "latched: an update cannot bring SERVING back")
}
