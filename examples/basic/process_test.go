package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests build this program and drive it as an orchestrator would:
// real process, real signals, real HTTP.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "drainkit-basic")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "basic")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			binPath = string(out)
		}
	})
	require.NoError(t, buildErr, binPath)
	return binPath
}

// proc is a running instance with its output lines streamed to a channel.
type proc struct {
	cmd   *exec.Cmd
	addr  string
	lines chan string
	all   strings.Builder
	mu    sync.Mutex
	done  chan struct{}
}

func start(t *testing.T, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(build(t))
	cmd.Env = append(os.Environ(), append([]string{"ADDR=127.0.0.1:0"}, env...)...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.all.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	go func() { _ = cmd.Wait(); close(p.done) }()
	line := p.await(t, "listening on ")
	p.addr = strings.TrimPrefix(line[strings.Index(line, "listening on "):], "listening on ")
	return p
}

// await returns the first line containing s, failing after a generous bound.
func (p *proc) await(t *testing.T, s string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("process ended before printing %q; output:\n%s", s, p.output())
			}
			if strings.Contains(line, s) {
				return line
			}
		case <-timeout:
			t.Fatalf("no line with %q within 30s; output:\n%s", s, p.output())
		}
	}
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.all.String()
}

func (p *proc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("process did not exit; output:\n%s", p.output())
	}
	return p.cmd.ProcessState.ExitCode()
}

func TestSlowRequestCompletesAndExitIsClean(t *testing.T) {
	p := start(t, "SLOW=1s", "DRAIN_DELAY=300ms", "DRAIN_TIMEOUT=10s")
	type answer struct {
		code int
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get("http://" + p.addr + "/slow")
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, string(b), err}
	}()
	p.await(t, "slow request started")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.await(t, `"new_status":"draining"`)
	resp, err := http.Get("http://" + p.addr + "/healthz/ready")
	require.NoError(t, err, "the server keeps serving during the propagation delay")
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "ready must fail on the first probe after the flip")

	a := <-got
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusOK, a.code)
	assert.Equal(t, "slow request done\n", a.body)
	assert.Equal(t, 0, p.exitCode(t), p.output())
	assert.Contains(t, p.output(), `"exit_code":0`)
}

func TestSecondSignalForces(t *testing.T) {
	p := start(t, "SLOW=60s", "DRAIN_DELAY=1s", "DRAIN_TIMEOUT=50s")
	go func() {
		if resp, err := http.Get("http://" + p.addr + "/slow"); err == nil {
			resp.Body.Close()
		}
	}()
	p.await(t, "slow request started")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.await(t, `"stage":"wait_in_flight"`) // the drain is waiting for the 60 s request
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 4, p.exitCode(t), p.output())
	assert.Contains(t, p.output(), `"forced":true`)
}

func TestHungHookExitsAtDeadline(t *testing.T) {
	p := start(t, "HANG_HOOK=1", "DRAIN_DELAY=100ms", "DRAIN_TIMEOUT=2s")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 3, p.exitCode(t), p.output())
	out := p.output()
	assert.Contains(t, out, `"name":"stuck-flush"`)
	assert.Contains(t, out, `"outcome":"timeout"`)
	assert.Contains(t, out, "main.main.func", "the report carries the stuck hook's stack")
}

func TestBadConfigRefusesToStart(t *testing.T) {
	cmd := exec.Command(build(t))
	cmd.Env = append(os.Environ(), "DRAIN_TIMEOUT=abc")
	out, _ := cmd.CombinedOutput()
	assert.Equal(t, 78, cmd.ProcessState.ExitCode())
	assert.Contains(t, string(out), `DRAIN_TIMEOUT=\"abc\"`)
}
