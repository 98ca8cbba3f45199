package drill

import (
	"context"
	"encoding/json"
	"errors"
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

// verdict is the part of the drill's -json document the test reads.
type verdict struct {
	Sent            int            `json:"sent"`
	Failed          int            `json:"failed"`
	FailedBy        map[string]int `json:"failed_by_cause"`
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
// refused (kube-proxy retries none), drainkit's keeps serving through
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
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, drainkit, "drill", "-json", "-lb", "kube", "-lag", "2s",
				"-env", "ADDR=127.0.0.1:{port}", "-path", "/hello", "-rate", "50", "--", svc)
			out, err := cmd.Output()
			var stderr string
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				stderr = string(ee.Stderr)
			}
			var v verdict
			require.NoError(t, json.Unmarshal(out, &v), "drill: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
			t.Logf("%s: sent %d, failed %d %v, balancer retries %d", tt.name, v.Sent, v.Failed, v.FailedBy, v.BalancerRetries)
			assert.Zero(t, v.BalancerRetries, "kube-proxy retries nothing")
			require.Len(t, v.Old, 3)
			for _, o := range v.Old {
				assert.Equal(t, 0, o.ExitCode, "%s's exit code", o.Name)
				assert.Equal(t, tt.wantReport, len(o.Report) > 0, "%s printed a drain report", o.Name)
			}
			if tt.wantFailed {
				assert.Equal(t, 1, cmd.ProcessState.ExitCode(), "the drill fails it")
				assert.Positive(t, v.Failed)
				assert.Equal(t, v.Failed, v.FailedBy["connection_refused"], "every failure is a refused connection: %v", v.FailedBy)
				return
			}
			assert.Equal(t, 0, cmd.ProcessState.ExitCode(), "the drill passes it; problems: %v", v.Problems)
			assert.Zero(t, v.Failed, "failed by cause: %v", v.FailedBy)
			assert.True(t, v.Pass)
		})
	}
}
