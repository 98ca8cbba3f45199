// Package proctest builds Go programs and runs them as an orchestrator
// would: a real process with its own environment, real signals, and its
// output read line by line so a test can wait for what it prints.
//
// It is the testing face of the end-to-end harness's process runner
// (internal/e2e.Proc): failures stop the test, and processes are killed at
// cleanup.
package proctest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drainkit/drainkit/internal/e2e"
)

// Wait bounds every wait in this package; generous, since the machine is
// shared. A test that hits it fails with the process's output.
const Wait = 60 * time.Second

var (
	mu     sync.Mutex
	builds = map[string]string{} // package → binary
)

// Build compiles pkg (an import path or a ./relative directory) with the
// race detector, once per test binary, and returns the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if bin, ok := builds[pkg]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "drainkit-bin")
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	name := filepath.Base(pkg)
	if name == "." || name == "/" {
		name = "prog"
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-race", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("proctest: go build %s: %v\n%s", pkg, err, out)
	}
	builds[pkg] = bin
	return bin
}

// Proc is a running program.
type Proc struct {
	*e2e.Proc
}

// Start runs bin with the current environment plus env, and kills it at
// cleanup if it is still running.
func Start(t testing.TB, name, bin string, env ...string) *Proc {
	t.Helper()
	p, err := e2e.StartProc(name, bin, env)
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
