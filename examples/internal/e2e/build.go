package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// Module paths of the programs the harness runs.
const (
	RoomServicePkg = "github.com/drainkit/drainkit/examples/room-service"
	GatewayPkg     = "github.com/drainkit/drainkit/examples/gateway"
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
		args := []string{"build", "-o", x.out}
		if race {
			args = append(args, "-race")
		}
		out, err := exec.CommandContext(ctx, "go", append(args, x.pkg)...).CombinedOutput()
		if err != nil {
			return Binaries{}, fmt.Errorf("e2e: go build %s: %w\n%s", x.pkg, err, out)
		}
	}
	return b, nil
}
