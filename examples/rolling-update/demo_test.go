package main

import (
	"testing"

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
}
