package main

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/e2e"
	"github.com/drainkit/drainkit/examples/internal/proctest"
)

// The Quickstart's first command, as a newcomer runs it on a machine
// without Redis: embedded Redis (snapshots in MariaDB, which scripts/test
// installs), and here the in-process balancer, so the
// fallback paths that the end-to-end tests (real redis-server, HAProxy) do
// not take are exercised too. Built as go run builds it, without the race
// detector: the embedded Redis lives in the demo's own process, and a race
// build of it, starved by the other packages' tests on two cores, stalled
// past the lease TTL's loss margin (the demo's children are plain builds,
// and the harness code runs race-checked in the e2e tests).
//
// The demo's first step is to build room-service and gateway. Compiling
// them from nothing can take minutes on a loaded machine, which is not
// what the test measures; so the test builds them first, plain as the demo
// does, and the demo's own build finds every package in the build cache and
// only links. Without that its first line waits on the compiler.
func TestDemoWithEmbeddedRedisAndInProcessBalancer(t *testing.T) {
	proctest.BuildPlain(t, e2e.RoomServicePkg)
	proctest.BuildPlain(t, e2e.GatewayPkg)
	p := proctest.Start(t, "rolling-update", proctest.BuildPlain(t, "."), "REDIS_URL=", "BALANCER=inprocess")
	p.Await(t, "snapshots: MariaDB") // scripts/test installs mariadb-server
	p.Await(t, "behind inprocess")
	p.Await(t, "OK: 0 failed requests, 0 lost writes, never two owners of a room.")
	require.Zero(t, p.ExitCode(t), "demo exit code\n%s", p.Output())
	assertTimelineInOrder(t, p.Output())
}

// assertTimelineInOrder checks that the lines of the demo's timeline, the
// load's included, come in the order of their offsets.
func assertTimelineInOrder(t *testing.T, out string) {
	t.Helper()
	_, section, ok := strings.Cut(out, "timeline (state changes of every process):\n")
	require.True(t, ok, "no timeline in\n%s", out)
	section, _, _ = strings.Cut(section, "\n\n")
	last, lines := int64(-1), 0
	for line := range strings.Lines(section) {
		offset, _, _ := strings.Cut(strings.TrimPrefix(line, "t+"), "ms")
		at, err := strconv.ParseInt(strings.TrimSpace(offset), 10, 64)
		require.NoError(t, err, "timeline line %q", line)
		assert.GreaterOrEqual(t, at, last, "timeline line %q comes after a later one\n%s", line, section)
		last, lines = at, lines+1
	}
	assert.Greater(t, lines, 2, "timeline\n%s", section)
}

// The demo takes no flags or arguments: a mistaken one is refused before
// anything starts, and -h says what the demo does and reads.
func TestDemoRefusesFlagsAndArgumentsBeforeStarting(t *testing.T) {
	bin := proctest.BuildPlain(t, ".")
	tests := []struct {
		give     []string
		wantCode int
		want     string
	}{
		{[]string{"-bogus=1"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-h"}, 0, "Environment: REDIS_URL"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.give, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), proctest.Wait)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tt.give...)
			cmd.Env = append(cmd.Environ(), "TMPDIR="+t.TempDir())
			out, err := cmd.CombinedOutput()
			code := 0
			if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
				code = exit.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantCode, code, "exit code\n%s", out)
			assert.Contains(t, string(out), tt.want)
			assert.NotContains(t, string(out), "building", "it started the demo")
		})
	}
}

// A signal mid-update (Ctrl-C, a closed terminal) stops the demo with
// exit 130 and one line saying so, not as a failure of the process the
// update was replacing at that moment.
func TestDemoInterruptedSaysSo(t *testing.T) {
	proctest.BuildPlain(t, e2e.RoomServicePkg)
	proctest.BuildPlain(t, e2e.GatewayPkg)
	bin := proctest.BuildPlain(t, ".")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			p := proctest.Start(t, "rolling-update", bin, "REDIS_URL=", "BALANCER=inprocess", "SNAPSHOTS=redis")
			p.Await(t, "rolling update of room-service under it")
			p.Signal(t, sig)
			assert.Equal(t, 130, p.ExitCode(t), "exit code\n%s", p.Output())
			assert.Contains(t, p.Output(), "rolling-update: interrupted; stopping what it started")
			assert.NotContains(t, p.Output(), "did not exit", "a process blamed for the signal")
		})
	}
}
