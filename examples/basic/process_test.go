package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/proctest"
)

// These tests build this program and drive it as an orchestrator would:
// real process, real signals, real HTTP.

// start runs the example on free ports, waits until it is Running, and
// returns it with its service and admin addresses. The addresses are
// printed by the start step, before Running: a signal sent on them alone
// aborts the start, and the drain then skips Flush (which made
// TestHungHookExitsAtDeadline exit 0 on a busy machine).
func start(t *testing.T, env ...string) (p *proctest.Proc, addr, admin string) {
	t.Helper()
	p = proctest.Start(t, "basic", proctest.Build(t, "."), append([]string{"ADDR=127.0.0.1:0", "ADMIN_ADDR=127.0.0.1:0"}, env...)...)
	line := p.Await(t, "listening on ")
	addr = line[strings.Index(line, "listening on ")+len("listening on "):]
	line = p.Await(t, "admin on ")
	admin = line[strings.Index(line, "admin on ")+len("admin on "):]
	p.Await(t, `"new_status":"running"`)
	return p, addr, admin
}

func TestSlowRequestCompletesAndExitIsClean(t *testing.T) {
	p, addr, admin := start(t, "SLOW=2s", "DRAIN_DELAY=300ms", "DRAIN_TIMEOUT=10s")
	type answer struct {
		code int
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/slow")
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, string(b), err}
	}()
	p.Await(t, "slow request started")
	p.Signal(t, syscall.SIGTERM)
	p.Await(t, `"new_status":"draining"`)
	resp, err := http.Get("http://" + admin + "/healthz/ready")
	require.NoError(t, err, "the server keeps serving during the propagation delay")
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "ready must fail on the first probe after the flip")
	p.Await(t, `"phase":"wait_in_flight","hooks"`) // intake is closed; the slow request still runs
	resp, err = http.Get("http://" + admin + "/healthz/live")
	require.NoError(t, err, "health keeps answering after intake stops")
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "liveness stays 200 during the drain")

	a := <-got
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusOK, a.code)
	assert.Equal(t, "slow request done\n", a.body)
	assert.Equal(t, 0, p.ExitCode(t), p.Output())
	assert.Contains(t, p.Output(), `"exit_code":0`)
}

func TestSecondSignalForces(t *testing.T) {
	p, addr, _ := start(t, "SLOW=60s", "DRAIN_DELAY=1s", "DRAIN_TIMEOUT=50s")
	go func() {
		if resp, err := http.Get("http://" + addr + "/slow"); err == nil {
			resp.Body.Close()
		}
	}()
	p.Await(t, "slow request started")
	p.Signal(t, syscall.SIGTERM)
	p.Await(t, `"phase":"wait_in_flight","hooks"`) // the drain is waiting for the 60 s request
	p.Signal(t, syscall.SIGTERM)
	assert.Equal(t, 4, p.ExitCode(t), p.Output())
	assert.Contains(t, p.Output(), `"forced":true`)
}

func TestHungHookExitsAtDeadline(t *testing.T) {
	p, _, _ := start(t, "HANG_HOOK=1", "DRAIN_DELAY=100ms", "DRAIN_TIMEOUT=2s")
	p.Signal(t, syscall.SIGTERM)
	assert.Equal(t, 3, p.ExitCode(t), p.Output())
	out := p.Output()
	assert.Contains(t, out, `"name":"stuck-flush"`)
	assert.Contains(t, out, `"outcome":"timeout"`)
	assert.Contains(t, out, "main.main.func", "the report carries the stuck hook's stack")
}

func TestBadConfigRefusesToStart(t *testing.T) {
	cmd := exec.Command(proctest.Build(t, "."))
	cmd.Env = append(os.Environ(), "DRAIN_TIMEOUT=abc")
	out, _ := cmd.CombinedOutput()
	assert.Equal(t, 78, cmd.ProcessState.ExitCode())
	assert.Contains(t, string(out), `DRAIN_TIMEOUT=\"abc\"`)
}
