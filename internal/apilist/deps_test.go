package apilist_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreLinksNoClientLibrary keeps the dependency clients in their own
// packages: a service that uses lifecycle, drain and readiness for plain
// HTTP must not link grpc-go, go-redis, database/sql or OpenTelemetry.
// Those come in only with the package that needs them (drain/grpcdrain,
// readiness/grpchealth, readiness/redischeck, readiness/sqlcheck, lease,
// drain/draintrace).
func TestCoreLinksNoClientLibrary(t *testing.T) {
	clients := []string{"google.golang.org/grpc", "github.com/redis/go-redis/v9", "database/sql", "go.opentelemetry.io/otel"}
	for _, core := range []string{"lifecycle", "drain", "readiness"} {
		out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`,
			"github.com/drainkit/drainkit/"+core).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", core, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Logf("%-10s links %d packages", core, len(lines))
		for _, line := range lines {
			f := strings.Fields(line)
			pkg, imports := f[0], f[1:]
			if isClient(pkg, clients) {
				continue // the client's own packages import one another
			}
			for _, imp := range imports {
				if isClient(imp, clients) {
					t.Errorf("%s: %s imports %s; want it only in the package of its adapter", core, pkg, imp)
				}
			}
		}
	}
}

func isClient(pkg string, clients []string) bool {
	for _, c := range clients {
		if pkg == c || strings.HasPrefix(pkg, c+"/") {
			return true
		}
	}
	return false
}
