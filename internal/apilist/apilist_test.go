package apilist_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drainkit/drainkit/internal/apilist"
)

var update = flag.Bool("update", false, "rewrite api/*.txt from the code")

// TestAPIListing fails when a public package's exported API differs from
// its listing in api/: change the listing with
//
//	go test ./internal/apilist -update
//
// and the API change is there for review to see.
func TestAPIListing(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs, err := apilist.Packages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("no public packages found")
	}
	total := 0
	want := map[string]bool{}
	for _, pkg := range pkgs {
		lines, err := apilist.List(filepath.Join(root, pkg))
		if err != nil {
			t.Fatal(err)
		}
		total += apilist.Names(lines)
		t.Logf("%-24s %3d names", pkg, apilist.Names(lines))
		file := filepath.Join(root, "api", strings.ReplaceAll(pkg, "/", "-")+".txt")
		want[filepath.Base(file)] = true
		got := strings.Join(lines, "\n") + "\n"
		if *update {
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: no listing (%v); run go test ./internal/apilist -update", pkg, err)
			continue
		}
		if string(b) != got {
			t.Errorf("%s: exported API differs from %s; run go test ./internal/apilist -update and review the diff", pkg, file)
		}
	}
	t.Logf("%-24s %3d names", "total", total)
	listed, _ := filepath.Glob(filepath.Join(root, "api", "*.txt"))
	for _, f := range listed {
		if !want[filepath.Base(f)] {
			if *update {
				_ = os.Remove(f)
				continue
			}
			t.Errorf("%s lists a package that no longer exists; run go test ./internal/apilist -update", f)
		}
	}
}
