// Package proctest builds Go programs and runs them as an orchestrator
// would: a real process with its own environment, real signals, and its
// output read line by line so a test can wait for what it prints.
package proctest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
	Cmd   *exec.Cmd
	Name  string
	lines chan string
	done  chan struct{}

	mu  sync.Mutex
	all strings.Builder
}

// Start runs bin with the current environment plus env, and kills it at
// cleanup if it is still running.
func Start(t testing.TB, name, bin string, env ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("proctest: start %s: %v", name, err)
	}
	p := &Proc{Cmd: cmd, Name: name, lines: make(chan string, 1<<16), done: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			p.mu.Lock()
			p.all.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default: // nobody is awaiting lines this far behind; Output keeps them
			}
		}
	}()
	go func() {
		<-read // Wait closes the pipe: read everything first
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// Await returns the first line not yet read that contains s.
func (p *Proc) Await(t testing.TB, s string) string {
	t.Helper()
	timeout := time.After(Wait)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("proctest: %s ended before printing %q; output:\n%s", p.Name, s, p.Output())
			}
			if strings.Contains(line, s) {
				return line
			}
		case <-timeout:
			t.Fatalf("proctest: %s printed no %q within %s; output:\n%s", p.Name, s, Wait, p.Output())
		}
	}
}

// Output returns everything the process printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.all.String()
}

// Signal sends sig to the process.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("proctest: signal %s: %v", p.Name, err)
	}
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ExitCode waits for the process to exit and returns its code.
func (p *Proc) ExitCode(t testing.TB) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(Wait):
		t.Fatalf("proctest: %s did not exit within %s; output:\n%s", p.Name, Wait, p.Output())
	}
	return p.Cmd.ProcessState.ExitCode()
}
