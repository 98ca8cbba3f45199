package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Module paths of the programs the harness runs.
const (
	RoomServicePkg = "github.com/drainkit/drainkit/examples/room-service"
	GatewayPkg     = "github.com/drainkit/drainkit/examples/gateway"
	// SubscribersPkg follows rooms' event streams for the streams scenario.
	SubscribersPkg = "github.com/drainkit/drainkit/examples/internal/e2e/subscribers"
)

// Binaries are the built programs the harness runs.
type Binaries struct {
	RoomService string
	Gateway     string
}

// Build compiles room-service and gateway into dir, with the race
// detector when race is set (the tests: a race under real load fails the
// run; the demo builds without it, for speed).
func Build(ctx context.Context, dir string, race bool) (Binaries, error) {
	b := Binaries{RoomService: filepath.Join(dir, "room-service"), Gateway: filepath.Join(dir, "gateway")}
	for _, x := range []struct{ pkg, out string }{{RoomServicePkg, b.RoomService}, {GatewayPkg, b.Gateway}} {
		if err := goBuild(ctx, "", x.pkg, x.out, race); err != nil {
			return Binaries{}, err
		}
	}
	return b, nil
}

// BuildSubscribers compiles the subscribers program into dir, always
// without the race detector: it is the harness, and its CPU is taken from
// the cluster it measures.
func BuildSubscribers(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "subscribers")
	return out, goBuild(ctx, "", SubscribersPkg, out, false)
}

// BuildRoomServiceFrom compiles room-service from src, another copy of
// the repository (an earlier commit's, for an upgrade), into out.
func BuildRoomServiceFrom(ctx context.Context, src, out string, race bool) error {
	return goBuild(ctx, src, RoomServicePkg, out, race)
}

// goBuild builds pkg into out, from this tree, or from the repository
// copy src when it is set (its own workspace).
func goBuild(ctx context.Context, src, pkg, out string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	if src != "" {
		cmd.Dir = filepath.Join(src, "examples")
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(src, "go.work"))
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("e2e: go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}
