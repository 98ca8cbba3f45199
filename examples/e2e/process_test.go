package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/harness"
	"github.com/drainkit/drainkit/internal/redistest"
)

// basicBin builds examples/basic, whose documented HANG_HOOK=1 adds a
// Flush hook that ignores its context: the basic example ships that knob to
// show a hung hook. room-service has no such hook, and gets no knob only
// this test would use.
func basicBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(buildDir(t), "basic")
	out, err := exec.Command("go", "build", "-race", "-o", bin, "github.com/drainkit/drainkit/examples/basic").CombinedOutput()
	require.NoError(t, err, "go build examples/basic\n%s", out)
	return bin
}

// run starts bin and kills it at cleanup.
func run(t *testing.T, name, bin string, env ...string) *harness.Proc {
	t.Helper()
	p, err := harness.StartProc(name, bin, env)
	require.NoError(t, err, "start %s", name)
	t.Cleanup(p.Kill)
	return p
}

func await(t *testing.T, p *harness.Proc, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	_, err := p.Await(ctx, s)
	require.NoError(t, err, "await %q", s)
}

func exitCode(t *testing.T, p *harness.Proc) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	code, err := p.Wait(ctx)
	require.NoError(t, err, "wait for the exit")
	return code
}

func TestHungHookExitsAtDeadline(t *testing.T) {
	const timeout = 2 * time.Second
	p := run(t, "basic", basicBin(t), "ADDR=127.0.0.1:0", "ADMIN_ADDR=127.0.0.1:0", "HANG_HOOK=1", "DRAIN_DELAY=100ms", "DRAIN_TIMEOUT="+timeout.String())
	await(t, p, `"new_status":"running"`) // a served process: an aborted start runs no Flush hook
	require.NoError(t, p.Signal(syscall.SIGTERM), "SIGTERM")
	assert.Equal(t, 3, exitCode(t, p), "exit code; want 3 (deadline)\n%s", p.Output())
	// Timed at the exit the harness saw, not at the report: the invariant
	// is that nothing keeps the process alive, after its report included.
	assert.LessOrEqual(t, p.ExitSeenAfter(), timeout+time.Second, "time from SIGTERM to the exit; want within DRAIN_TIMEOUT %s (+1 s)", timeout)
	out := p.Output()
	for _, want := range []string{`"msg":"drain report"`, `"name":"stuck-flush"`, `"outcome":"timeout"`} {
		assert.Contains(t, out, want, "output: the report must name the hung hook")
	}
}

func TestSecondSignalForces(t *testing.T) {
	rs := redistest.Start(t)
	grpcAddr, adminAddr := freeAddr(t), freeAddr(t)
	p := run(t, "room", binaries(t).RoomService, "NODE_ID=room-forced", "REDIS_URL="+rs.URL(),
		"GRPC_ADDR="+grpcAddr, "ADMIN_ADDR="+adminAddr, "LEASE_TTL=2s", "DRAIN_DELAY=20s", "DRAIN_TIMEOUT=30s")
	await(t, p, `"new_status":"running"`)
	require.NoError(t, p.Signal(syscall.SIGTERM), "first SIGTERM")
	await(t, p, `"new_status":"draining"`)
	second := time.Now()
	require.NoError(t, p.Signal(syscall.SIGTERM), "second SIGTERM")
	assert.Equal(t, 4, exitCode(t, p), "exit code; want 4 (forced)\n%s", p.Output())
	exited, _ := p.Exited()
	assert.LessOrEqual(t, exited.Sub(second), 2*time.Second, "time from the second SIGTERM to the exit; want within 2 s (the drain delay was 20 s)")
	assert.Contains(t, p.Output(), `"forced":true`, "output: the drain report")
}

func TestBadConfigurationRefusesToStart(t *testing.T) {
	rs := redistest.Start(t)
	dead := freeAddr(t)
	b := binaries(t)
	tests := []struct {
		name     string
		bin      string
		env      []string
		wantCode int
		wantText string
	}{
		{"room-service drain timeout not a duration", b.RoomService, []string{"DRAIN_TIMEOUT=abc"}, 78, `DRAIN_TIMEOUT=\"abc\"`},
		{"room-service delay longer than timeout", b.RoomService, []string{"DRAIN_TIMEOUT=5s", "DRAIN_DELAY=8s"}, 78, `DRAIN_DELAY=\"8s\"`},
		{"room-service redis unreachable", b.RoomService, []string{"REDIS_URL=redis://" + dead}, 5, `REDIS_URL=\"redis://` + dead + `\": PING failed`},
		{"gateway drain timeout not a duration", b.Gateway, []string{"DRAIN_TIMEOUT=abc"}, 78, `DRAIN_TIMEOUT=\"abc\"`},
		{"gateway delay longer than timeout", b.Gateway, []string{"DRAIN_TIMEOUT=5s", "DRAIN_DELAY=8s"}, 78, `DRAIN_DELAY=\"8s\"`},
		{"gateway without backends", b.Gateway, []string{"ROOM_GRPC_ADDRS="}, 78, `ROOM_GRPC_ADDRS`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{"NODE_ID=n", "REDIS_URL=" + rs.URL(), "GRPC_ADDR=" + freeAddr(t),
				"ADMIN_ADDR=" + freeAddr(t), "HTTP_ADDR=" + freeAddr(t), "ROOM_GRPC_ADDRS=" + dead}, tt.env...)
			p := run(t, tt.name, tt.bin, env...)
			assert.Equal(t, tt.wantCode, exitCode(t, p), "exit code\n%s", p.Output())
			assert.Contains(t, p.Output(), tt.wantText, "output")
		})
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := harness.FreePort()
	require.NoError(t, err, "free port")
	return a
}
