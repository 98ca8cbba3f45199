package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one running program whose combined output is kept line by line,
// so the harness can wait for what it prints and the checker can read its
// logs after it exited.
type Proc struct {
	// Name identifies the process in errors and the timeline (its NODE_ID).
	Name string

	cmd  *exec.Cmd
	done chan struct{} // closed once the process exited and its output was read to its end

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every new line
	exitAt  time.Time
	termAt  time.Time // first SIGTERM sent by the harness
	report  time.Time // the time in its drain report line, by the process's own clock
}

// StartProc runs bin with the current environment plus env. Its output
// (stdout and stderr) is read until it exits; the caller must Kill or wait
// for it.
//
// The child writes into an [os.Pipe] of its own, so exec starts no copy
// goroutine and the process is waited for while its output is read: the
// exit time is taken when the kernel reports the exit, not after a backlog
// of output was read by a busy test. The pipe is enlarged so that a burst
// of log lines does not block the child on a reader that lags.
func StartProc(name, bin string, env []string, args ...string) (*Proc, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("e2e: %s: %w", name, err)
	}
	growPipe(w)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	dieWithParent(cmd)
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	_ = w.Close() // the child holds the write end now: EOF once it is gone
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("e2e: start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, done: make(chan struct{}), changed: make(chan struct{})}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = cmd.Wait()
		p.mu.Lock()
		p.exitAt = time.Now()
		p.mu.Unlock()
	}()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			p.add(sc.Text())
		}
		_ = r.Close()
		<-exited
		p.mu.Lock()
		close(p.changed)
		p.changed = nil
		p.mu.Unlock()
	}()
	return p, nil
}

func (p *Proc) add(line string) {
	at, isReport := reportTime(line)
	p.mu.Lock()
	defer p.mu.Unlock()
	if isReport {
		p.report = at
	}
	p.lines = append(p.lines, line)
	close(p.changed)
	p.changed = make(chan struct{})
}

// Lines returns every line printed so far.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// Output returns everything printed so far, for error messages.
func (p *Proc) Output() string { return strings.Join(p.Lines(), "\n") }

// Await waits for a line containing s (one printed earlier counts) and
// returns it. It fails when the process exits first or ctx ends.
func (p *Proc) Await(ctx context.Context, s string) (string, error) {
	seen := 0
	for {
		p.mu.Lock()
		lines, changed := p.lines[seen:], p.changed
		seen = len(p.lines)
		p.mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, s) {
				return l, nil
			}
		}
		if changed == nil {
			return "", fmt.Errorf("e2e: %s exited before printing %q; output:\n%s", p.Name, s, tail(p.Output()))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return "", fmt.Errorf("e2e: %s printed no %q: %w; output:\n%s", p.Name, s, ctx.Err(), tail(p.Output()))
		}
	}
}

// Signal sends sig; the first SIGTERM's time is kept as the start of the
// process's drain.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	if sig == syscall.SIGTERM && p.termAt.IsZero() {
		p.termAt = time.Now()
	}
	p.mu.Unlock()
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("e2e: signal %s to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Kill ends the process at once (SIGKILL) and waits for it.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Done is closed once the process has exited and its output was read to
// its end.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit and returns its exit code (-1 when a
// signal ended it).
func (p *Proc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("e2e: %s did not exit: %w; output:\n%s", p.Name, ctx.Err(), tail(p.Output()))
	}
}

// Exited reports whether the process has exited, and when: the time the
// harness saw the kernel report its exit, which may come before its last
// output was read (see [Proc.Done]). It is an upper bound, late by the
// harness's own scheduling latency: with thousands of busy goroutines on
// a loaded machine, a goroutine waits for a CPU for over a second at the
// 99.9th percentile (runtime/metrics /sched/latencies:seconds, measured in
// the streams scenario), and the one that reaps is no exception.
func (p *Proc) Exited() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitAt, !p.exitAt.IsZero()
}

// DrainTime is the time from the first SIGTERM to the exit; zero if either
// did not happen. The exit is timed by the process's own clock where it
// can be: the time of its drain report line, the last thing a drainkit
// service does before it exits, if that came after the SIGTERM. Otherwise
// (no report: killed, crashed, refused to start) it is the harness's
// [Proc.Exited], late by the harness's latency. Call it once the process
// is done ([Proc.Wait]), so that every line has been read.
//
// A process that lingered after its report would be timed short: where
// that is what a test checks, use [Proc.ExitSeenAfter].
func (p *Proc) DrainTime() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.termAt.IsZero() || p.exitAt.IsZero() {
		return 0
	}
	if p.report.After(p.termAt) && p.report.Before(p.exitAt) {
		return p.report.Sub(p.termAt)
	}
	return p.exitAt.Sub(p.termAt)
}

// ExitSeenAfter is the time from the first SIGTERM to the exit the harness
// saw; zero if either did not happen. It is never early, only late by the
// harness's latency (see [Proc.Exited]).
func (p *Proc) ExitSeenAfter() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.termAt.IsZero() || p.exitAt.IsZero() {
		return 0
	}
	return p.exitAt.Sub(p.termAt)
}

// Signalled is when the harness sent the first SIGTERM; zero if it did
// not.
func (p *Proc) Signalled() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.termAt
}

// reportTime is the time of a drain report line, as slog's JSON handler
// writes it: {"time":"<RFC 3339>",…,"msg":"drain report",….
func reportTime(line string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(line, `{"time":"`)
	if !ok || !strings.Contains(line, `"msg":"drain report"`) {
		return time.Time{}, false
	}
	v, _, ok := strings.Cut(rest, `"`)
	if !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	return at, err == nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// tail keeps the end of a long output for an error message.
func tail(s string) string {
	const max = 8000
	if len(s) > max {
		return "…" + s[len(s)-max:]
	}
	return s
}
