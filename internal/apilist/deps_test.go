package apilist_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCoreLinksNoClientLibrary keeps the dependency clients in their own
// packages: a service that uses lifecycle, drain and readiness for plain
// HTTP, with fx or without, must not link grpc-go, go-redis, database/sql
// or OpenTelemetry. Those come in only with the package that needs them
// (drain/grpcdrain, readiness/grpchealth, readiness/redischeck,
// readiness/sqlcheck, lease, drain/draintrace, fxmodule/fxgrpc,
// fxmodule/fxlease).
func TestCoreLinksNoClientLibrary(t *testing.T) {
	clients := []string{"google.golang.org/grpc", "github.com/redis/go-redis/v9", "database/sql", "go.opentelemetry.io/otel"}
	for _, core := range []string{"lifecycle", "drain", "readiness", "fxmodule", "fxmodule/fxmoduletest"} {
		out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`,
			"github.com/drainkit/drainkit/"+core).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", core, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Logf("%-21s links %d packages", core, len(lines))
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

// TestLibraryLinksNoSQLDriver keeps the MySQL driver a test-only
// dependency: the tests of readiness/sqlcheck and internal/mariadbtest use
// it, and no package a user imports links it (sqlcheck takes a *sql.DB).
func TestLibraryLinksNoSQLDriver(t *testing.T) {
	const driver = "github.com/go-sql-driver/mysql"
	// GOWORK=off: the library module alone, not the examples the
	// workspace joins to it (they link the driver, as a service does).
	list := func(args ...string) ([]byte, error) {
		cmd := exec.Command("go", args...)
		cmd.Env = append(os.Environ(), "GOWORK=off")
		return cmd.Output()
	}
	out, err := list("list", "github.com/drainkit/drainkit/...")
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		if !strings.Contains(p, "/internal/") {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("go list: no library package")
	}
	args := append([]string{"list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`}, pkgs...)
	out, err = list(args...)
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	sawSQLCheck := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		sawSQLCheck = sawSQLCheck || f[0] == "github.com/drainkit/drainkit/readiness/sqlcheck"
		for _, imp := range f[1:] {
			if isClient(imp, []string{driver}) {
				t.Errorf("%s imports %s; want it only in tests", f[0], imp)
			}
		}
	}
	if !sawSQLCheck {
		t.Error("readiness/sqlcheck is not among the packages listed")
	}
}
