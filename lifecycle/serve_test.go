package lifecycle_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// freeAddr returns an address no listener holds at the moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func quietManager(t *testing.T, cfg lifecycle.Config) *lifecycle.Manager {
	t.Helper()
	cfg.Service, cfg.NodeID, cfg.Logger = "svc", "n1", slog.New(slog.DiscardHandler)
	m, err := lifecycle.New(cfg)
	require.NoError(t, err)
	return m
}

// A port that is taken fails the start: the process never reports Running
// with a server that does not serve.
func TestServeFailsTheStartBeforeRunningWhenThePortIsTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	m := quietManager(t, lifecycle.Config{})
	var states []lifecycle.State
	m.OnTransition(func(tr lifecycle.Transition) { states = append(states, tr.To) })
	require.NoError(t, m.Serve("api", &http.Server{Addr: held.Addr().String()}))

	r := m.Run(context.Background())
	assert.Equal(t, lifecycle.ExitStartFailed, r.ExitCode)
	assert.Contains(t, r.StartError, `serve "api": listen tcp `+held.Addr().String())
	assert.NotContains(t, states, lifecycle.Running)
	serve, ok := r.Hook("api.serve")
	require.True(t, ok)
	assert.Equal(t, drain.OK, serve.Outcome, "nothing listened: nothing to wait for")
}

// A nil server, or an empty name (whose hook would be ".serve"), is refused
// when it is given, as a configuration error, and adds nothing.
func TestServeRefusesANilServerOrAnEmptyName(t *testing.T) {
	tests := []struct {
		name     string
		giveName string
		giveSrv  *http.Server
		want     string
	}{
		{"nil server", "api", nil, `lifecycle: Serve "api": srv is nil`},
		{"empty name", "", &http.Server{}, `lifecycle: Serve: name is empty; want the server's name, such as "api"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := quietManager(t, lifecycle.Config{})
			err := m.Serve(tt.giveName, tt.giveSrv)
			require.Error(t, err, "Serve(%q, …): got no error; want %q", tt.giveName, tt.want)
			assert.ErrorIs(t, err, lifecycle.ErrConfig)
			assert.EqualError(t, err, tt.want)
			r := m.Shutdown(context.Background(), "test")
			assert.Empty(t, r.Hooks, "hooks of the drain: a refused Serve adds none")
		})
	}
}

// An intake (drain.HTTPHooks and Serve) answers 503 after the delay, its
// listener still open; a server of probes given to Serve alone still
// answers liveness in phase release. Both close in phase close. Every
// serve goroutine has ended when Run returns.
func TestServeKeepsAProbeServerAnsweringThroughTheDrain(t *testing.T) {
	apiAddr, adminAddr := freeAddr(t), freeAddr(t)
	m := quietManager(t, lifecycle.Config{})
	reg, err := readiness.New(readiness.Config{Service: "svc", NodeID: "n1", Logger: slog.New(slog.DiscardHandler)}, m.State)
	require.NoError(t, err)
	probes := http.NewServeMux()
	reg.Mount(probes)
	api := &http.Server{Addr: apiAddr, Handler: m.Tracker().Middleware(http.NotFoundHandler())}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(addr string) string {
		resp, err := client.Get("http://" + addr + readiness.LivePath)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return fmt.Sprint(resp.StatusCode)
	}
	var atRelease, intakeAtRelease string
	probe := drain.Hook{Name: "probe", Phase: drain.Release, Run: func(context.Context) error {
		atRelease, intakeAtRelease = get(adminAddr), get(apiAddr)
		return nil
	}}
	require.NoError(t, errors.Join(
		m.AddHook(drain.HTTPHooks("api", api, m.Tracker())...),
		m.AddHook(probe, drain.Hook{Name: "readiness.close", Phase: drain.Close, Run: reg.Close}),
		m.Serve("api", api),
		m.Serve("admin", &http.Server{Addr: adminAddr, Handler: probes}),
	))
	running := make(chan struct{})
	m.OnTransition(func(tr lifecycle.Transition) {
		if tr.To == lifecycle.Running {
			close(running)
		}
	})
	ctx, stop := context.WithCancel(context.Background())
	report := make(chan *lifecycle.Report, 1)
	go func() { report <- m.Run(ctx) }()
	<-running
	assert.Equal(t, "200", get(adminAddr))
	stop()
	r := <-report

	assert.Equal(t, lifecycle.ExitClean, r.ExitCode, "%+v", r.Hooks)
	assert.Equal(t, "200", atRelease, "liveness after stop_intake")
	assert.Equal(t, "503", intakeAtRelease, "the intake is closed by then, its listener open")
	for _, name := range []string{"api.close", "api.serve", "admin.serve"} {
		h, ok := r.Hook(name)
		require.True(t, ok, name)
		assert.Equal(t, drain.OK, h.Outcome, name)
	}
	assert.Contains(t, get(adminAddr), "connection refused", "closed in phase close")
	assert.Contains(t, get(apiAddr), "connection refused", "closed in phase close")
}

// exampleEnv makes the test binary run ExampleManager_Run as a process of
// its own, as a service's main would.
const exampleEnv = "DRAINKIT_EXAMPLE_MANAGER_RUN"

func TestExampleManagerRunProcess(t *testing.T) {
	if os.Getenv(exampleEnv) != "1" {
		t.Skip("the process of TestExampleManagerRunFailsBeforeRunningOnAPortClash")
	}
	ExampleManager_Run() // exits
}

// The example binds its ports in a start step: with :8080 taken it exits
// 5 and never says Running (an example that served in a goroutine said
// Running, then waited for a signal with nothing serving).
func TestExampleManagerRunFailsBeforeRunningOnAPortClash(t *testing.T) {
	held, err := net.Listen("tcp", ":8080")
	if err == nil { // else something else holds it: a clash all the same
		defer held.Close()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestExampleManagerRunProcess$")
	cmd.Env = append(os.Environ(), exampleEnv+"=1", "SERVICE_NAME=example")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var logs []string
	for sc := bufio.NewScanner(stderr); sc.Scan(); {
		logs = append(logs, sc.Text())
		if strings.Contains(sc.Text(), "new_status=running") {
			require.NoError(t, cmd.Process.Kill())
			break
		}
	}
	_, _ = io.Copy(io.Discard, stderr)
	err = cmd.Wait()
	out := strings.Join(logs, "\n")
	assert.NotContains(t, out, "new_status=running")
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, out)
	assert.Equal(t, lifecycle.ExitStartFailed, exit.ExitCode(), out)
	assert.Contains(t, out, `serve \"api\": listen tcp :8080`, out)
}
