package proctest

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNothingLeftInTempDir: the built binary and whatever the started
// program wrote to its temporary directory are gone once the (sub)test that
// built and started it has cleaned up.
func TestNothingLeftInTempDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where os.MkdirTemp, t.TempDir and the child write by default
	t.Run("build and start", func(t *testing.T) {
		bin := Build(t, "./testdata/tempfile")
		assert.Equal(t, bin, Build(t, "./testdata/tempfile"), "second Build in one test; want the first build")
		p := Start(t, "tempfile", bin)
		p.Await(t, "wrote ")
		require.Zero(t, p.ExitCode(t), "exit code\n%s", p.Output())
		t.Run("subtest reuses the build", func(t *testing.T) {
			assert.Equal(t, bin, Build(t, "./testdata/tempfile"), "Build in a subtest; want its parent's build")
		})
	})
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err, "ReadDir %s", tmp)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	assert.Empty(t, left, "left in %s after the subtest's cleanup", tmp)
}
