package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/internal/e2e"
)

// perRoomLeases is the last commit whose room-service holds per-room
// leases (node|holder|fence routes with a TTL, each renewed, and a
// heartbeat with holder), the format session leases replaced.
const perRoomLeases = "75e6dea945d8b54e39e9252227821e8b8ffe0a94"

// TestUpgradeFromPerRoomLeases rolls room-services built from
// perRoomLeases to this tree's, under load: nothing is lost, no room has
// two owners, fences only rise, as in any rolling update. Old and new
// nodes run side by side while it lasts: a new node never takes a route
// an old one renews, nor an old node one of a new node's session.
func TestUpgradeFromPerRoomLeases(t *testing.T) {
	race, err := servicesRace(os.Getenv("E2E_SERVICES_RACE"))
	require.NoError(t, err)
	old := buildRoomServiceAt(t, perRoomLeases, race)
	now := binaries(t)
	c, rs := startCluster(t, e2e.Config{Bin: e2e.Binaries{RoomService: old, Gateway: now.Gateway}})
	ctx := context.Background()
	first := c.Rooms()[0].Name
	require.NoError(t, rs.Client().HGet(ctx, "room:node:{"+first+"}", "holder").Err(),
		"%s's heartbeat: want the per-room format's (a holder field): is the old build the old format?", first)
	c.SetRoomService(now.RoomService)
	res, drained, w := rollUnderLoad(t, c, rollBound(e2e.DefaultRooms, 0), c.RollRooms)
	r := check(t, c, res, drained, w)
	requireCleanRoll(t, drained, e2e.DefaultRooms, e2e.DefaultDrainTimeout)
	assert.NotZero(t, r.RoomsHandedOver, "rooms that changed owner: with none, the update moved nothing")
	last := c.Rooms()[0].Name
	assert.NoError(t, rs.Client().HGet(ctx, "room:node:{"+last+"}", "epoch").Err(), "%s's session: want this tree's format (an epoch field)", last)
}

// buildRoomServiceAt builds room-service from the repository's commit,
// extracted with git archive (the repository's history is needed: a
// shallow clone fails here, saying so).
func buildRoomServiceAt(t *testing.T, commit string, race bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	require.NoError(t, err, "git rev-parse --show-toplevel")
	root := strings.TrimSpace(string(top))
	src := filepath.Join(buildDir(t), "src-"+commit[:12])
	require.NoError(t, os.MkdirAll(src, 0o755))
	archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "extract commit %s (a shallow clone lacks it: fetch the history, git fetch --unshallow): %s", commit, out)
	bin := filepath.Join(src, "room-service.bin")
	require.NoError(t, e2e.BuildRoomServiceFrom(ctx, src, bin, race), "build room-service at %s", commit)
	return bin
}
