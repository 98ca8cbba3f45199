package readiness_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoClientLibrary keeps the dependency clients in their own
// packages: a service that imports readiness and not redischeck, sqlcheck
// or grpchealth must not link go-redis, database/sql or grpc-go through
// readiness. Only the drain package may bring grpc-go in: what drain links
// is drain's to decide, not readiness's.
func TestLinksNoClientLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`,
		"github.com/drainkit/drainkit/readiness").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	clients := []string{"google.golang.org/grpc", "github.com/redis/go-redis/v9", "database/sql"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, imports := f[0], f[1:]
		if isClient(pkg, clients) {
			continue // the client's own packages import one another
		}
		for _, imp := range imports {
			if !isClient(imp, clients) {
				continue
			}
			drain := strings.HasPrefix(pkg, "github.com/drainkit/drainkit/drain")
			if !drain || !strings.HasPrefix(imp, "google.golang.org/grpc") {
				t.Errorf("%s imports %s, linked by every user of readiness; want it only in the package of its check", pkg, imp)
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
