// Package proctest builds Go programs and runs them as an orchestrator
// would: a real process with its own environment, real signals, and its
// output read line by line so a test can wait for what it prints.
//
// It is the testing face of the end-to-end harness's process runner
// (internal/e2e.Proc): failures stop the test, and processes are killed at
// cleanup. Nothing outlives the test: binaries are built into a t.TempDir,
// and each process gets one as its TMPDIR.
package proctest

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drainkit/drainkit/internal/harness"
)

// Wait bounds every wait in this package; generous, since the machine is
// shared. A test that hits it fails with the process's output.
const Wait = 60 * time.Second

var (
	mu     sync.Mutex
	builds = map[string]build{} // by package
)

// build is a binary and the test that owns it.
type build struct {
	bin   string
	owner string // the test's name
}

// Build compiles pkg (an import path or a ./relative directory) with the
// race detector and returns the binary's path. The binary lives in a
// t.TempDir, so it is removed when t's test ends; t and its subtests share
// it, while another test builds its own (the Go build cache makes that a
// link, not a compile).
func Build(t testing.TB, pkg string) string {
	t.Helper()
	return buildWith(t, pkg, "-race")
}

// BuildPlain is Build without the race detector, for a test of the command
// a user runs as such (the Quickstart's go run): a race build runs several
// times slower, and a program that hosts a server of its own (the demo's
// embedded Redis) then starves on a shared machine, which tests the
// machine rather than the program.
func BuildPlain(t testing.TB, pkg string) string {
	t.Helper()
	return buildWith(t, pkg)
}

func buildWith(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	key := strings.Join(append([]string{pkg}, flags...), " ")
	if b, ok := builds[key]; ok && (t.Name() == b.owner || strings.HasPrefix(t.Name(), b.owner+"/")) {
		return b.bin
	}
	name := filepath.Base(pkg)
	if name == "." || name == "/" {
		name = "prog"
	}
	bin := filepath.Join(t.TempDir(), name)
	args := append(append([]string{"build"}, flags...), "-o", bin, pkg)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("proctest: go build %s: %v\n%s", pkg, err, out)
	}
	prev, had := builds[key]
	builds[key] = build{bin: bin, owner: t.Name()}
	t.Cleanup(func() { // before t.TempDir's removal: cleanups run last first
		mu.Lock()
		defer mu.Unlock()
		if had {
			builds[key] = prev // an enclosing test's build, still alive
		} else {
			delete(builds, key)
		}
	})
	return bin
}

// Proc is a running program.
type Proc struct {
	*harness.Proc
}

// Start runs bin with the current environment plus env, and kills it at
// cleanup if it is still running. TMPDIR points at a t.TempDir, so
// whatever the program writes there, even if it is killed, is removed with
// the test; env may set another.
func Start(t testing.TB, name, bin string, env ...string) *Proc {
	t.Helper()
	env = append([]string{"TMPDIR=" + t.TempDir()}, env...)
	p, err := harness.StartProc(name, bin, env)
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	t.Cleanup(p.Kill)
	return &Proc{p}
}

// Await returns the first line the process printed that contains s,
// waiting for it if need be.
func (p *Proc) Await(t testing.TB, s string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	line, err := p.Proc.Await(ctx, s)
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	return line
}

// Signal sends sig to the process.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Proc.Signal(sig); err != nil {
		t.Fatalf("proctest: %v", err)
	}
}

// ExitCode waits for the process to exit and returns its code.
func (p *Proc) ExitCode(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	code, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	return code
}
