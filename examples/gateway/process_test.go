package main

import (
	"bufio"
	"context"
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

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// This test builds the gateway and drives it as an orchestrator would: a
// real process, a real SIGTERM, real HTTP and gRPC.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "drainkit-gateway")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gateway")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr, binPath = err, string(out)
		}
	})
	require.NoError(t, buildErr, binPath)
	return binPath
}

// proc is a running gateway with its output lines streamed to a channel.
type proc struct {
	cmd   *exec.Cmd
	addr  string
	lines chan string
	done  chan struct{}
	mu    sync.Mutex
	all   strings.Builder
}

func startProc(t *testing.T, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(build(t))
	cmd.Env = append(os.Environ(), append([]string{"HTTP_ADDR=127.0.0.1:0", "NODE_ID=gw-proc"}, env...)...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, lines: make(chan string, 4096), done: make(chan struct{})}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.all.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default: // nobody awaits this many lines; the transcript keeps them
			}
		}
	}()
	go func() {
		<-scanned // Wait closes the pipe: read it all first
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	line := p.await(t, "listening on ")
	p.addr = strings.TrimSpace(line[strings.Index(line, "listening on ")+len("listening on "):])
	return p
}

// await returns the first line containing s, failing after a generous bound.
func (p *proc) await(t *testing.T, s string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
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
			t.Fatalf("no line with %q within 60s; output:\n%s", s, p.output())
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

func TestSIGTERMMidRequestCompletesAndExitsClean(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b := startBackend(t, &testRooms{apply: func(ctx context.Context, req *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
		once.Do(func() { close(started) })
		select {
		case <-release:
			return &roompb.ApplyResponse{Status: roompb.ApplyResponse_APPLIED, Seq: 42}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	p := startProc(t, "ROOM_GRPC_ADDRS="+b.addr, "DRAIN_DELAY=200ms", "DRAIN_TIMEOUT=20s")
	c := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	eventually(t, c, "http://"+p.addr+"/healthz/ready", http.StatusOK)

	type answer struct {
		code int
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := c.Post("http://"+p.addr+"/api/v1/rooms/r1/commands", "application/json",
			strings.NewReader(`{"command_id":"c1","op":"x"}`))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, string(body), err}
	}()
	<-started
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.await(t, `"new_status":"draining"`)
	p.await(t, `"stage":"wait_in_flight"`) // the drain now waits for our request
	close(release)

	a := <-got
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusOK, a.code, a.body)
	assert.JSONEq(t, `{"status":"applied","seq":42}`, a.body)
	assert.Equal(t, 0, p.exitCode(t), p.output())
	assert.Contains(t, p.output(), `"exit_code":0`)
}
