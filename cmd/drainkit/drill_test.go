package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/harness"
)

// short are the flags that keep a drill of the test service brief and
// light on a shared machine.
var short = []string{"-rate", "50", "-warmup", "300ms", "-tail", "300ms", "-path", "/hello"}

// service is the test binary as the drill's command, in mode.
func service(mode string, extra ...string) []string {
	args := append([]string{"-env", "ADDR=127.0.0.1:{port}", "-env", "DRILL_TEST_SERVICE=" + mode, "-env", "NAME={name}"}, extra...)
	return append(args, "--", os.Args[0])
}

// drillRun runs the drainkit command in this process and returns its exit
// code, stdout and stderr.
func drillRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	code := run(ctx, append([]string{"drill"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// drillJSON runs a drill with -json and decodes its verdict.
func drillJSON(t *testing.T, args ...string) (int, verdictJSON) {
	t.Helper()
	code, out, errOut := drillRun(t, append([]string{"-json"}, args...)...)
	var v verdictJSON
	require.NoError(t, json.Unmarshal([]byte(out), &v), "stdout:\n%s\nstderr:\n%s", out, errOut)
	for _, p := range v.Old {
		assert.False(t, harness.Alive(p.Pid), "%s (pid %d) runs after the drill", p.Name, p.Pid)
	}
	for _, p := range v.New {
		assert.False(t, harness.Alive(p.Pid), "%s (pid %d) runs after the drill", p.Name, p.Pid)
	}
	return code, v
}

// verdictJSON is the -json document as a CI job reads it.
type verdictJSON struct {
	Balancer        string          `json:"balancer"`
	Sent            int             `json:"sent"`
	Succeeded       int             `json:"succeeded"`
	Failed          int             `json:"failed"`
	FailedBy        map[string]int  `json:"failed_by_cause"`
	Failed5xx       map[string]int  `json:"failed_5xx_by_code"`
	ClientRetries   int             `json:"client_retries"`
	BalancerRetries int             `json:"balancer_retries"`
	LatencyDuring   struct{ N int } `json:"latency_during_update"`
	LatencyOutside  struct{ N int } `json:"latency_outside_update"`
	Old             []struct {
		Name       string  `json:"name"`
		Pid        int     `json:"pid"`
		ExitCode   int     `json:"exit_code"`
		Killed     bool    `json:"killed"`
		TimeToExit float64 `json:"time_to_exit_ms"`
		Report     *struct {
			ExitCode int `json:"exit_code"`
			Hooks    []struct {
				Name, Outcome string
			} `json:"hooks"`
		} `json:"drain_report"`
	} `json:"old_instances"`
	New []struct {
		Name string `json:"name"`
		Pid  int    `json:"pid"`
	} `json:"new_instances"`
	Problems []string `json:"problems"`
	Pass     bool     `json:"pass"`
}

// Input the drill cannot run with is refused before anything starts,
// with exit code 2 and an error that names the flag and the value.
func TestDrillRefusesBadInput(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want string
	}{
		{name: "unknown flag", give: []string{"-rats", "5", "--", "true"}, want: "flag provided but not defined: -rats"},
		{name: "no command", give: []string{"-env", "ADDR=127.0.0.1:{port}"}, want: "no command"},
		{name: "command not found", give: []string{"-env", "ADDR=127.0.0.1:{port}", "--", "no-such-service-anywhere"}, want: `command "no-such-service-anywhere"`},
		{name: "no {port}", give: []string{"-env", "ADDR=127.0.0.1:8080", "--", "true"}, want: "no -env has {port}"},
		{name: "no -env", give: []string{"--", "true"}, want: "no -env has {port}"},
		{name: "unknown placeholder", give: []string{"-env", "ADDR=127.0.0.1:{prot}", "--", "true"}, want: "unknown placeholder {prot}"},
		{name: "env without =", give: []string{"-env", "ADDR", "-env", "A=:{port}", "--", "true"}, want: `-env "ADDR": want KEY=VALUE`},
		{name: "lag without kube", give: []string{"-lb", "haproxy", "-lag", "2s", "-env", "A=:{port}", "--", "true"}, want: "-lag 2s: only -lb kube"},
		{name: "unknown balancer", give: []string{"-lb", "nginx", "-env", "A=:{port}", "--", "true"}, want: `-lb "nginx"`},
		{name: "go run", give: []string{"-env", "A=:{port}", "--", "go", "run", "./svc"}, want: "go run does not pass SIGTERM"},
		{name: "admin never passed", give: []string{"-env", "A=:{port}", "-ready", "http://127.0.0.1:{admin}/ready", "--", "true"}, want: "no -env passes {admin}"},
		{name: "remote readiness", give: []string{"-env", "A=:{port}", "-ready", "http://example.com:{port}/", "--", "true"}, want: "loopback only"},
		{name: "path not a path", give: []string{"-env", "A=:{port}", "-path", "http://example.com/", "--", "true"}, want: "want a path starting with /"},
		{name: "bad header", give: []string{"-env", "A=:{port}", "-header", "NoColon", "--", "true"}, want: `-header "NoColon"`},
		{name: "rate", give: []string{"-env", "A=:{port}", "-rate", "0", "--", "true"}, want: "-rate 0"},
		{name: "html in no directory", give: []string{"-env", "A=:{port}", "-html", "/no/such/dir/drill.html", "--", "true"}, want: `-html "/no/such/dir/drill.html": directory /no/such/dir does not exist`},
		{name: "html a directory", give: []string{"-env", "A=:{port}", "-html", os.TempDir(), "--", "true"}, want: "is a directory; want a file"},
		{name: "html empty", give: []string{"-env", "A=:{port}", "-html", "", "--", "true"}, want: `-html "": want a file`},
		{name: "call without grpc", give: []string{"-env", "A=:{port}", "-call", "/a.B/C", "--", "true"}, want: "-call is for a gRPC load: add -grpc"},
		{name: "request without grpc", give: []string{"-env", "A=:{port}", "-request", "0a00", "--", "true"}, want: "-request is for a gRPC load: add -grpc"},
		{name: "roundrobin without grpc", give: []string{"-env", "A=:{port}", "-lb", "roundrobin", "--", "true"}, want: "-lb roundrobin is grpc-go's balancer: add -grpc"},
		{name: "path with grpc", give: []string{"-grpc", "-env", "A=:{port}", "-path", "/hello", "--", "true"}, want: "-path is for an HTTP load: with -grpc, -call names the method"},
		{name: "malformed call", give: []string{"-grpc", "-env", "A=:{port}", "-call", "grpc.health.v1.Health.Check", "--", "true"}, want: `-call "grpc.health.v1.Health.Check": want a method's full name, /package.Service/Method`},
		{name: "request not hex", give: []string{"-grpc", "-env", "A=:{port}", "-request", "hello", "--", "true"}, want: `-request "hello": want the request message's bytes in hex`},
		{name: "grpc behind haproxy", give: []string{"-grpc", "-env", "A=:{port}", "-lb", "haproxy", "--", "true"}, want: `-lb "haproxy": a gRPC load goes through -lb roundrobin`},
		{name: "grpc negative lag", give: []string{"-grpc", "-env", "A=:{port}", "-lb", "kube", "-lag", "-1s", "--", "true"}, want: "-lag -1s: must not be negative"},
		{name: "grpc readiness behind haproxy", give: []string{"-env", "A=:{port}", "-lb", "haproxy", "-ready", "grpc", "--", "true"}, want: `-ready grpc: the haproxy balancer checks readiness over HTTP`},
		{name: "grace past any load", give: []string{"-env", "A=:{port}", "-grace", "1000000h", "--", "true"}, want: "the drill sends at most 1000000"},
		{name: "negative tail", give: []string{"-env", "A=:{port}", "-tail", "-3s", "--", "true"}, want: "-tail -3s: must not be negative"},
		{name: "tail with duration", give: []string{"-env", "A=:{port}", "-duration", "20s", "-tail", "5s", "--", "true"}, want: "-tail 5s: with -duration the load runs exactly 20s; give one of them"},
		{name: "negative warmup", give: []string{"-env", "A=:{port}", "-warmup", "-1s", "--", "true"}, want: "-warmup -1s: must not be negative"},
		{name: "grpc bad lag", give: []string{"-grpc", "-env", "A=:{port}", "-lag", "2", "--", "true"}, want: `invalid value "2" for flag -lag`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := drillRun(t, tt.give...)
			assert.Equal(t, exitCantRun, code, "exit code; stderr:\n%s", errOut)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tt.want)
			assert.Contains(t, errOut, `Run "drainkit drill -h"`)
		})
	}
}

// -h prints the usage on stdout and exits 0.
func TestDrillHelp(t *testing.T) {
	code, out, _ := drillRun(t, "-h")
	assert.Equal(t, exitPass, code)
	for _, want := range []string{"Usage: drainkit drill [flags] -- <command> [args]", "-lb MODE", "{port}", "Exit status",
		"(default /grpc.health.v1.Health/Check)", "(default auto)"} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "%!", "every verb of the usage has its value")
}

// An instance that exits, or whose readiness URL never answers within
// -start, ends the drill with exit code 2 and its last lines; nothing it
// started is left running.
func TestDrillEndsWhenAnInstanceNeverBecomesReady(t *testing.T) {
	tests := []struct {
		mode string
		grpc bool
		want []string
	}{
		{mode: "crash", want: []string{"exited (exit status 3)", "fatal: cannot open the database"}},
		{mode: "deaf", want: []string{"did not become ready within -start 1s", "never answered 2xx", "test service deaf starting"}},
		{mode: "deaf", grpc: true, want: []string{"did not become ready within -start 1s", "never answered SERVING", "connection refused", "test service deaf starting"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s grpc=%t", tt.mode, tt.grpc), func(t *testing.T) {
			pids := t.TempDir()
			args := []string{"-start", "1s", "-n", "2"}
			if tt.grpc { // readiness is gRPC health on {port}
				args = append(args, "-grpc")
			}
			args = append(args, service(tt.mode, "-env", "PID_DIR="+pids)...)
			code, out, errOut := drillRun(t, args...)
			assert.Equal(t, exitCantRun, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			for _, w := range tt.want {
				assert.Contains(t, errOut, w)
			}
			assertNoneRuns(t, pids)
		})
	}
}

// assertNoneRuns checks that no process that wrote its pid into dir runs.
func assertNoneRuns(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(dir + "/" + e.Name())
		require.NoError(t, err)
		var pid int
		_, err = fmt.Sscan(string(b), &pid)
		require.NoError(t, err)
		assert.False(t, harness.Alive(pid), "%s (pid %d) runs after the drill", e.Name(), pid)
	}
}

// A service that keeps serving while the balancer notices its readiness
// flip loses nothing in any balancer mode: exit code 0, every request
// succeeded, every old instance exited 0 and its drain report is read.
// Its readiness is on a second port, through the {admin} template.
func TestDrillPassesAServiceThatDrains(t *testing.T) {
	for _, lb := range []string{"haproxy", "inprocess", "kube"} {
		t.Run(lb, func(t *testing.T) {
			page := filepath.Join(t.TempDir(), "drill.html")
			args := append([]string{"-n", "2", "-lb", lb, "-ready", "http://127.0.0.1:{admin}/healthz/ready", "-html", page}, short...)
			if lb == "kube" {
				args = append(args, "-lag", "300ms")
			}
			args = append(args, service("drains", "-env", "DELAY=300ms", "-env", "ADMIN_ADDR=127.0.0.1:{admin}")...)
			code, v := drillJSON(t, args...)
			html := assertPage(t, page, v)
			for _, moment := range []string{"ready at", "SIGTERM at", "readiness flip (drain began) at", "intake stopped at", "exit at"} {
				assert.Equal(t, 2, strings.Count(html, "i1 "+moment)+strings.Count(html, "i2 "+moment), "old instances' %q marks", moment)
			}
			if lb == "kube" {
				assert.Equal(t, 2, strings.Count(html, "endpoint removed at"))
			}
			assert.Equal(t, exitPass, code, "problems: %v", v.Problems)
			assert.True(t, v.Pass)
			assert.Equal(t, lb, v.Balancer)
			assert.Positive(t, v.Sent)
			assert.Equal(t, v.Sent, v.Succeeded)
			assert.Zero(t, v.Failed, "failed by cause: %v", v.FailedBy)
			assert.Zero(t, v.ClientRetries)
			assert.Positive(t, v.LatencyDuring.N, "requests during the update")
			assert.Positive(t, v.LatencyOutside.N, "requests outside it")
			require.Len(t, v.Old, 2)
			require.Len(t, v.New, 2)
			for _, o := range v.Old {
				assert.Equal(t, 0, o.ExitCode, o.Name)
				assert.False(t, o.Killed, o.Name)
				assert.GreaterOrEqual(t, o.TimeToExit, 300.0, "%s kept serving its quiet window", o.Name)
				if assert.NotNil(t, o.Report, "%s printed a drain report", o.Name) {
					assert.Equal(t, "api.stop_intake", o.Report.Hooks[0].Name)
				}
			}
		})
	}
}

// In the Kubernetes mode an instance gets new connections until -lag
// after its SIGTERM: a service that closes its listener at SIGTERM has
// them refused (or reset, from its listen backlog), and kube-proxy
// retries none. Behind HAProxy the same
// service loses nothing, because HAProxy retries a refused connection.
func TestDrillKubeModeRefusesConnectionsToAServiceThatStopsAtOnce(t *testing.T) {
	page := filepath.Join(t.TempDir(), "drill.html")
	args := append([]string{"-n", "2", "-lb", "kube", "-lag", "1s", "-html", page}, short...)
	code, v := drillJSON(t, append(args, service("naive")...)...)
	assertPage(t, page, v)
	assert.Equal(t, exitFail, code)
	assert.False(t, v.Pass)
	assert.Positive(t, v.Failed)
	// Every failure is at the connection: refused once the listener is
	// closed, or reset when the connection reached the listen backlog just
	// before the close (the kernel completed its handshake, nobody accepts
	// it). Never an answer, never a timeout.
	assert.Positive(t, v.FailedBy["connection_refused"], "refused connections: %v", v.FailedBy)
	assert.Equal(t, v.Failed, v.FailedBy["connection_refused"]+v.FailedBy["reset"], "every failure refused or reset: %v", v.FailedBy)
	assert.Zero(t, v.BalancerRetries)
	assert.Contains(t, v.Problems, fmt.Sprintf("%d of %d requests failed", v.Failed, v.Sent))
	for _, o := range v.Old {
		assert.Equal(t, 0, o.ExitCode, "%s exits 0: its shutdown is not what fails", o.Name)
		assert.Nil(t, o.Report)
	}
}

// The balancer never retries a 5xx: a service that answers 503 while it
// drains, with readiness still 200, has the 503s reach the client,
// counted by code.
func TestDrillBalancerPassesA5xxToTheClient(t *testing.T) {
	for _, lb := range []string{"haproxy", "inprocess"} {
		t.Run(lb, func(t *testing.T) {
			args := append([]string{"-n", "1", "-lb", lb}, short...)
			code, v := drillJSON(t, append(args, service("answers503", "-env", "DELAY=500ms")...)...)
			assert.Equal(t, exitFail, code)
			assert.Positive(t, v.FailedBy["5xx"])
			assert.Equal(t, v.FailedBy["5xx"], v.Failed5xx["503"], "every 5xx is a 503: %v", v.Failed5xx)
		})
	}
}

// An old instance that does not exit within -grace is SIGKILLed and
// counted as such; one that exits non-zero fails the drill too.
func TestDrillJudgesHowOldInstancesExit(t *testing.T) {
	tests := []struct {
		mode       string
		wantCode   int
		wantKilled bool
		want       string
	}{
		{mode: "stubborn", wantCode: -1, wantKilled: true, want: "did not exit within -grace 500ms and was SIGKILLed"},
		{mode: "exit1", wantCode: 1, want: "exited after its SIGTERM with exit status 1"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			args := append([]string{"-n", "1", "-lb", "kube", "-lag", "0s", "-grace", "500ms"}, short...)
			code, v := drillJSON(t, append(args, service(tt.mode)...)...)
			assert.Equal(t, exitFail, code)
			require.Len(t, v.Old, 1)
			assert.Equal(t, tt.wantCode, v.Old[0].ExitCode)
			assert.Equal(t, tt.wantKilled, v.Old[0].Killed)
			assert.Contains(t, v.Problems, "i1 "+tt.want)
		})
	}
}

// The table says what the JSON says, for a person: counts by cause,
// retries, latency, each old instance's exit and its drain report.
func TestDrillTable(t *testing.T) {
	args := append([]string{"-n", "1", "-lb", "inprocess"}, short...)
	code, out, errOut := drillRun(t, append(args, service("drains", "-env", "DELAY=300ms")...)...)
	require.Equal(t, exitPass, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	for _, want := range []string{
		"drainkit drill: 1 instance of ", " behind inprocess, 50 requests/s",
		"failed                     0 (connection refused 0, reset 0, timeout 0, 5xx 0, other 0)",
		"client retries             0 (the load never retries)",
		"latency during the update  p50 ", "old i1                     exit 0, ",
		"drain report: ", "; after the flip 7 arrived, the last 250ms after it, 0 refused after intake",
		"stop_intake  api.stop_intake  ok  200µs",
		"PASS: no request failed, every old instance exited 0 in time.",
	} {
		assert.Contains(t, out, want)
	}
}

// A pass that the balancer's retries made says so: behind kube-proxy,
// which retries nothing, those connections would have failed. (Read on a
// verdict: a drill of a service that closes its listener at SIGTERM passes
// only now and then, as a connection that reached the backlog just before
// the close is reset, not refused, and fails.)
func TestDrillPassThatTheBalancersRetriesMadeSaysSo(t *testing.T) {
	v := &verdict{Pass: true, Command: []string{"/usr/local/bin/svc"}, Instances: 1, Balancer: "inprocess", BalancerRetries: 17}
	out := v.table()
	assert.Contains(t, out, "\nPASS: no request failed, every old instance exited 0 in time, but only because the balancer retried 17 refused connections: behind one that retries nothing (kube-proxy: -lb kube) they fail.\n")
	v.BalancerRetries = 0
	assert.Contains(t, v.table(), "\nPASS: no request failed, every old instance exited 0 in time.\n")
}

// A gRPC pass that grpc-go's transparent retries helped says how many:
// a client without them would have seen those calls fail.
func TestDrillGRPCPassNamesTheTransparentRetries(t *testing.T) {
	v := &verdict{Protocol: "grpc", ClientRetries: 3}
	assert.Equal(t, "PASS: no call failed, every old instance exited 0 in time, with 3 transparent retries by grpc-go of calls no server processed (every grpc-go client makes them; others may not).", v.passed())
	v.ClientRetries = 0
	assert.Equal(t, "PASS: no call failed, every old instance exited 0 in time.", v.passed())
}

// Every process the drill started dies with it: SIGKILLed, the drill
// leaves nothing behind (the kernel kills its children), and interrupted
// (here once its instances serve) it stops them and exits 2.
func TestDrillsProcessesDieWithIt(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			pids := t.TempDir()
			args := append([]string{"-n", "2", "-lb", "kube", "-warmup", "1h"}, service("drains", "-env", "PID_DIR="+pids)...)
			p, err := harness.StartProc("drainkit", os.Args[0], []string{"DRILL_TEST_MAIN=" + strings.Join(append([]string{"drill"}, args...), "\n")})
			require.NoError(t, err)
			defer p.Kill()
			require.Eventually(t, func() bool { // the instances write their pids once they serve
				entries, _ := os.ReadDir(pids)
				n := 0
				for _, e := range entries {
					if !strings.HasPrefix(e.Name(), ".") {
						n++
					}
				}
				return n == 2
			}, time.Minute, 10*time.Millisecond)
			require.NoError(t, p.Signal(sig))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			code, err := p.Wait(ctx)
			require.NoError(t, err)
			if sig == syscall.SIGINT {
				assert.Equal(t, exitCantRun, code, "output:\n%s", p.Output())
				assert.Contains(t, p.Output(), "interrupted")
			}
			require.Eventually(t, func() bool { return noneRuns(pids) }, 10*time.Second, 10*time.Millisecond)
		})
	}
}

func noneRuns(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, _ := os.ReadFile(dir + "/" + e.Name())
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil && harness.Alive(pid) {
			return false
		}
	}
	return true
}

// Every request has the shape the flags give (method, body, headers,
// Host), and the paths take turns: half of them go to one that answers
// 500, and fail, counted under 5xx with their code.
func TestDrillSendsTheRequestShape(t *testing.T) {
	args := []string{"-n", "1", "-lb", "kube", "-lag", "0s", "-rate", "50", "-warmup", "300ms", "-tail", "300ms",
		"-method", "POST", "-body", "ping", "-header", "X-Drill: yes", "-header", "Host: svc.local",
		"-path", "/shape", "-path", "/broken"}
	code, v := drillJSON(t, append(args, service("drains", "-env", "DELAY=300ms")...)...)
	assert.Equal(t, exitFail, code)
	assert.Equal(t, v.Sent/2, v.Failed, "the odd requests, to /broken, fail; by cause: %v", v.FailedBy)
	assert.Equal(t, v.Failed, v.Failed5xx["500"], "every failure is /broken's 500: %v", v.FailedBy)
}

// assertPage checks the -html page against the -json verdict of the same
// drill: its bars add up to the verdict's counts by outcome, its table
// says the same, every old instance has a lane, and it fetches nothing.
func assertPage(t *testing.T, path string, v verdictJSON) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	page := string(b)
	// Error texts in tooltips may quote a URL; nothing may load one.
	for _, fetch := range []string{"<script", "<link", "<img", "<iframe", "<object", " src=", " href=", "url(", "@import"} {
		assert.False(t, strings.Contains(page, fetch), "the page opens with no network, yet holds %q", fetch)
	}
	bars := map[string]int{}
	for _, m := range regexp.MustCompile(`<rect class="([a-z_0-9]+)" data-n="(\d+)"`).FindAllStringSubmatch(page, -1) {
		n, _ := strconv.Atoi(m[2])
		bars[m[1]] += n
	}
	assert.Equal(t, v.Succeeded, bars["ok"], "succeeded, in the bars")
	failures := map[string]int{}
	for _, m := range regexp.MustCompile(`<line class="failure ([a-z_0-9]+)"`).FindAllStringSubmatch(page, -1) {
		failures[m[1]]++
	}
	cell := func(id string) int {
		m := regexp.MustCompile(`id="` + id + `">(\d+)<`).FindStringSubmatch(page)
		require.NotNil(t, m, "cell %s", id)
		n, _ := strconv.Atoi(m[1])
		return n
	}
	for cause, n := range v.FailedBy {
		assert.Equal(t, n, bars[cause], "%s, in the bars", cause)
		assert.Equal(t, n, failures[cause], "%s, marked", cause)
		assert.Equal(t, n, cell("failed-"+cause), "%s, in the table", cause)
	}
	assert.Equal(t, v.Pass, strings.Contains(page, `<p class="verdict pass">PASS: no `), "the page's verdict")
	assert.Equal(t, v.Sent, cell("sent"))
	assert.Equal(t, v.Succeeded, cell("succeeded"))
	assert.Equal(t, v.Failed, cell("failed"))
	assert.Equal(t, v.ClientRetries, cell("client-retries"))
	assert.Equal(t, v.BalancerRetries, cell("balancer-retries"))
	for _, o := range v.Old {
		assert.Contains(t, page, ">old "+o.Name+"</text>")
	}
	for _, o := range v.New {
		assert.Contains(t, page, ">new "+o.Name+"</text>")
	}
	return page
}
