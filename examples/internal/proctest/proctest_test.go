package proctest

import (
	"os"
	"testing"
)

// TestNothingLeftInTempDir: the built binary and whatever the started
// program wrote to its temporary directory are gone once the (sub)test that
// built and started it has cleaned up.
func TestNothingLeftInTempDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where os.MkdirTemp, t.TempDir and the child write by default
	t.Run("build and start", func(t *testing.T) {
		bin := Build(t, "./testdata/tempfile")
		if again := Build(t, "./testdata/tempfile"); again != bin {
			t.Errorf("second Build in one test: got %s; want the first build, %s", again, bin)
		}
		p := Start(t, "tempfile", bin)
		p.Await(t, "wrote ")
		if code := p.ExitCode(t); code != 0 {
			t.Fatalf("exit code %d; want 0\n%s", code, p.Output())
		}
		t.Run("subtest reuses the build", func(t *testing.T) {
			if got := Build(t, "./testdata/tempfile"); got != bin {
				t.Errorf("Build in a subtest: got %s; want its parent's build, %s", got, bin)
			}
		})
	})
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left in %s after the subtest's cleanup: %s", tmp, e.Name())
	}
}
