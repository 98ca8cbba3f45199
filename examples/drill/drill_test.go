package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// build compiles pkg into dir as name and returns the binary. The
// services are built without the race detector: the drill measures their
// shutdown, and their own tests run with it.
func build(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	b, err := exec.CommandContext(t.Context(), "go", "build", "-o", out, pkg).CombinedOutput()
	require.NoError(t, err, "go build %s:\n%s", pkg, b)
	return out
}

// runDrill runs drainkit's drill with -json and args against svc and
// returns its exit code, its verdict (zero when it could not run: exit 2)
// and its stderr.
func runDrill(t *testing.T, drainkit, svc string, args ...string) (int, verdict, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, drainkit, append(append([]string{"drill", "-json"}, args...), "--", svc)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NotNil(t, cmd.ProcessState, "drill: %v", err)
	code := cmd.ProcessState.ExitCode()
	var v verdict
	if code != 2 {
		require.NoError(t, json.Unmarshal(out, &v), "drill: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
		t.Logf("sent %d, failed %d %v by gRPC code %v, balancer retries %d", v.Sent, v.Failed, v.FailedBy, v.FailedByCode, v.BalancerRetries)
	}
	return code, v, stderr.String()
}

// verdict is the part of the drill's -json document the test reads.
type verdict struct {
	Sent            int            `json:"sent"`
	Failed          int            `json:"failed"`
	FailedBy        map[string]int `json:"failed_by_cause"`
	FailedByCode    map[string]int `json:"failed_by_grpc_code"`
	BalancerRetries int            `json:"balancer_retries"`
	Old             []struct {
		Name     string          `json:"name"`
		ExitCode int             `json:"exit_code"`
		Report   json.RawMessage `json:"drain_report"`
	} `json:"old_instances"`
	Problems []string `json:"problems"`
	Pass     bool     `json:"pass"`
}

// The drill in the Kubernetes mode, endpoints removed 2 s after SIGTERM
// as kube-proxy does once a pod's deletion has propagated: the service
// that calls srv.Shutdown at SIGTERM has the connections of those 2 s
// refused, or reset if they sat in its accept backlog as it closed
// (kube-proxy retries none), drainkit's keeps serving through
// its DRAIN_DELAY and loses none. Both exit 0: the exit code does not
// tell them apart, the clients do.
func TestDrillTellsTheTwoShutdownsApart(t *testing.T) {
	dir := t.TempDir()
	drainkit := build(t, dir, "drainkit", "github.com/drainkit/drainkit/cmd/drainkit")
	tests := []struct {
		name       string
		bin, pkg   string
		wantFailed bool
		wantReport bool
	}{
		{name: "srv.Shutdown", bin: "http-naive", pkg: "github.com/drainkit/drainkit/examples/http-naive", wantFailed: true},
		{name: "drainkit", bin: "http-drainkit", pkg: "github.com/drainkit/drainkit/examples/http", wantReport: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := build(t, dir, tt.bin, tt.pkg)
			code, v, stderr := runDrill(t, drainkit, svc, "-lb", "kube", "-lag", "2s",
				"-env", "ADDR=127.0.0.1:{port}", "-path", "/hello", "-rate", "50")
			require.NotEqual(t, 2, code, "the drill could not run:\n%s", stderr)
			assert.Zero(t, v.BalancerRetries, "kube-proxy retries nothing")
			require.Len(t, v.Old, 3)
			for _, o := range v.Old {
				assert.Equal(t, 0, o.ExitCode, "%s's exit code", o.Name)
				assert.Equal(t, tt.wantReport, len(o.Report) > 0, "%s printed a drain report", o.Name)
			}
			if tt.wantFailed {
				assert.Equal(t, 1, code, "the drill fails it")
				assert.Positive(t, v.Failed)
				// Refused once the listener is closed; reset when the
				// connection had been queued in the kernel's accept
				// backlog as the listener closed (Linux answers those
				// with RST). Both are the listener closing too early;
				// a 5xx or a timeout would be something else.
				assert.Equal(t, v.Failed, v.FailedBy["connection_refused"]+v.FailedBy["reset"],
					"every failure is the closed listener's: %v", v.FailedBy)
				assert.Positive(t, v.FailedBy["connection_refused"], "refused connections: %v", v.FailedBy)
				return
			}
			assert.Equal(t, 0, code, "the drill passes it; problems: %v", v.Problems)
			assert.Zero(t, v.Failed, "failed by cause: %v", v.FailedBy)
			assert.True(t, v.Pass)
		})
	}
}

// The same for gRPC: unary calls through a Service (-lb kube, endpoints
// removed 2 s after SIGTERM), over client connections that are placed
// when dialled and stay. The service that calls GracefulStop at SIGTERM
// sends GOAWAY and closes its listener at once: clients that dial again
// within the 2 s may land on it and are refused, their calls fail
// UNAVAILABLE (grpc-go's retries are off, as the drill never retries).
// drainkit's keeps serving through DRAIN_DELAY: none fails. Through
// grpc-go's health-checked round_robin (-lb roundrobin) drainkit's loses
// none either. A method the services do not serve is bad input (exit 2).
func TestDrillTellsTheTwoGRPCShutdownsApart(t *testing.T) {
	dir := t.TempDir()
	drainkit := build(t, dir, "drainkit", "github.com/drainkit/drainkit/cmd/drainkit")
	naive := build(t, dir, "grpc-naive", "github.com/drainkit/drainkit/examples/grpc-naive")
	ours := build(t, dir, "grpc-drainkit", "github.com/drainkit/drainkit/examples/grpc")
	drill := func(t *testing.T, svc string, args ...string) (int, verdict, string) {
		t.Helper()
		return runDrill(t, drainkit, svc, append([]string{"-grpc", "-n", "2", "-rate", "50",
			"-env", "GRPC_ADDR=127.0.0.1:{port}", "-env", "ADMIN_ADDR=127.0.0.1:{admin}"}, args...)...)
	}
	const call = "/grpc.testing.TestService/UnaryCall"
	t.Run("GracefulStop behind kube", func(t *testing.T) {
		code, v, _ := drill(t, naive, "-lb", "kube", "-lag", "2s", "-call", call)
		assert.Equal(t, 1, code, "the drill fails it")
		assert.Positive(t, v.Failed)
		assert.Equal(t, v.Failed, v.FailedBy["unavailable"], "every failed call UNAVAILABLE: %v", v.FailedByCode)
		assert.Equal(t, v.Failed, v.FailedByCode["Unavailable"])
		for _, o := range v.Old {
			assert.Equal(t, 0, o.ExitCode, "%s exits 0: its shutdown is not what fails", o.Name)
			assert.Empty(t, o.Report)
		}
	})
	for _, lb := range []string{"kube", "roundrobin"} {
		t.Run("drainkit behind "+lb, func(t *testing.T) {
			args := []string{"-lb", lb, "-lag", "2s", "-call", call, "-env", "DRAIN_DELAY=3s"}
			code, v, _ := drill(t, ours, args...)
			assert.Equal(t, 0, code, "the drill passes it; problems: %v", v.Problems)
			assert.Positive(t, v.Sent)
			assert.Zero(t, v.Failed, "failed by code: %v", v.FailedByCode)
			require.Len(t, v.Old, 2)
			for _, o := range v.Old {
				assert.Equal(t, 0, o.ExitCode, "%s's exit code", o.Name)
				assert.NotEmpty(t, o.Report, "%s printed a drain report", o.Name)
			}
		})
	}
	t.Run("unknown method", func(t *testing.T) {
		code, _, stderr := drill(t, naive, "-lb", "kube", "-call", "/grpc.testing.TestService/NoSuchCall")
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, "-call /grpc.testing.TestService/NoSuchCall with -request : the first call, before the update, failed: ")
		assert.Contains(t, stderr, "Unimplemented")
	})
}
