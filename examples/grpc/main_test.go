package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // client-side health checking: the healthCheckConfig below
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/drainkit/drainkit/internal/harness"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clientServiceConfig is what the README tells a grpc-go client to use:
// round_robin over every address, each watched through grpc.health.v1, so
// a replica leaves the client's picks when its health turns NOT_SERVING at
// the flip, before its intake stops.
const clientServiceConfig = `{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}}`

// Two replicas behind a grpc-go client configured as the README says
// (round_robin, client-side health checking, over both addresses as a
// headless Service's DNS gives them), unary RPCs from 8 callers that never
// retry (grpc-go's transparent retries, of calls no server processed, are
// its own and cannot be turned off): one replica SIGTERMed under
// the load drains with exit 0, and not one RPC fails.
func TestReplacementUnderLoadLosesNoRPC(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "grpc-example")
	out, err := exec.Command("go", "build", "-race", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	var ports harness.Ports
	defer ports.Close()
	addrs, err := ports.Pick(4)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var replicas []*harness.Proc
	for i := range 2 {
		p, err := harness.StartProc("replica-"+string(rune('a'+i)), bin, []string{
			"SERVICE_NAME=grpc-example", "NODE_ID=r" + string(rune('a'+i)),
			"GRPC_ADDR=" + addrs[2*i], "ADMIN_ADDR=" + addrs[2*i+1],
			"DRAIN_DELAY=1s", "DRAIN_TIMEOUT=10s", "GORACE=atexit_sleep_ms=0",
		})
		require.NoError(t, err)
		t.Cleanup(p.Kill)
		replicas = append(replicas, p)
		require.NoError(t, harness.WaitReady(ctx, p, "http://"+addrs[2*i+1]+"/healthz/ready"))
		// What the client's health checking watches, as a Kubernetes gRPC
		// readiness probe would: it turns SERVING on an evaluation of its
		// own, just after the HTTP readiness (grpchealth.Server.OnTransition).
		require.NoError(t, harness.WaitServing(ctx, p, addrs[2*i]))
	}
	metrics, err := http.Get("http://" + addrs[1] + "/metrics") // Admin's, from the app's registry
	require.NoError(t, err)
	body, err := io.ReadAll(metrics.Body)
	require.NoError(t, metrics.Body.Close())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, metrics.StatusCode, "GET /metrics: %s", body)
	assert.Contains(t, string(body), "service_draining", "drainkit's metrics on /metrics")

	r := manual.NewBuilderWithScheme("replicas")
	r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: addrs[0]}, {Addr: addrs[2]}}})
	conn, err := grpc.NewClient(r.Scheme()+":///grpc-example",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(clientServiceConfig),
		grpc.WithDisableRetry(), // a retry would hide a failure of the product's
	)
	require.NoError(t, err)
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)

	var calls, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := client.UnaryCall(cctx, &testgrpc.SimpleRequest{})
				ccancel()
				calls.Add(1)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	// Under load on both replicas, then one drains.
	waitCalls(t, &calls, 200)
	require.NoError(t, replicas[0].Signal(syscall.SIGTERM))
	code, err := replicas[0].Wait(ctx)
	require.NoError(t, err, "wait for the SIGTERMed replica")
	atExit := calls.Load()
	waitCalls(t, &calls, atExit+200) // and the other goes on serving
	close(stop)
	wg.Wait()

	assert.Equal(t, 0, code, "the drained replica's exit code; its last lines:\n%s", replicas[0].LastLines(20))
	assert.Zero(t, failed.Load(), "failed RPCs of %d (first: %v)", calls.Load(), firstErr.Load())
	t.Logf("%d RPCs, %d failed; the drained replica's drain took %s", calls.Load(), failed.Load(), replicas[0].DrainTime())
}

// waitCalls waits until calls reaches n: the load's own progress, polled.
func waitCalls(t *testing.T, calls *atomic.Int64, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for calls.Load() < n {
		require.True(t, time.Now().Before(deadline), "%d RPCs in 30 s; want %d", calls.Load(), n)
		time.Sleep(10 * time.Millisecond)
	}
}
