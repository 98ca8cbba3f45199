package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one running program whose combined output is kept line by line,
// so the harness can wait for what it prints and read its logs after it
// exited.
type Proc struct {
	// Name identifies the process in errors and timelines.
	Name string

	cmd  *exec.Cmd
	done chan struct{} // closed once the process exited and what it wrote was read

	mu         sync.Mutex
	lines      []string
	changed    chan struct{} // closed and replaced on every new line
	exitAt     time.Time
	reaped     bool      // set before the process is reaped: its pid may be reused after
	termAt     time.Time // first SIGTERM sent by the harness
	report     time.Time // the time in its drain report line, by the process's own clock
	reportLine string    // its last drain report line
}

// StartProc runs bin with the current environment plus env, in a process
// group of its own (a terminal's Ctrl-C reaches the harness, which decides
// what the children get). Its output (stdout and stderr) is read until it
// exits; the caller must Kill or wait for it.
//
// The child writes into an [os.Pipe] of its own, so exec starts no copy
// goroutine and the process is waited for while its output is read: the
// exit time is taken when the kernel reports the exit, not after a backlog
// of output was read by a busy harness. The pipe is enlarged so that a
// burst of log lines does not block the child on a reader that lags.
func StartProc(name, bin string, env []string, args ...string) (*Proc, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("harness: %s: %w", name, err)
	}
	growPipe(w)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	OwnGroup(cmd)
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	_ = w.Close() // the child holds the write end now: EOF once it is gone
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("harness: start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, done: make(chan struct{}), changed: make(chan struct{})}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		p.reap()
		if _, known := pipeBuffered(r); known {
			_ = r.SetReadDeadline(time.Unix(1, 0)) // read what is left, then stop
		}
	}()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(output{r})
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
		p.report, p.reportLine = at, line
	}
	p.lines = append(p.lines, line)
	close(p.changed)
	p.changed = make(chan struct{})
}

// reap waits for the process to exit. Where the kernel lets a parent see
// an exit before reaping it, what is left of the process's group is
// killed then, while the dead leader still holds its pid (and so the
// group's id): a service's exit ends everything it started, as a
// container's main process's exit ends the container.
func (p *Proc) reap() {
	seen := awaitExit(p.cmd.Process)
	p.mu.Lock()
	if seen {
		p.exitAt = time.Now()
		killGroup(p.cmd.Process)
	}
	p.reaped = true
	p.mu.Unlock()
	_ = p.cmd.Wait()
	if !seen {
		p.mu.Lock()
		p.exitAt = time.Now()
		p.mu.Unlock()
	}
}

// output reads a process's output pipe to its end, or, once the process
// has exited (the pipe's read deadline set in the past), to what the pipe
// holds: everything the process wrote is in the pipe when it exits, but a
// descendant that left its group (setsid, a daemon) may hold the pipe open
// for as long as it lives.
type output struct{ pipe *os.File }

func (o output) Read(b []byte) (int, error) {
	n, err := o.pipe.Read(b)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return n, err
	}
	if left, _ := pipeBuffered(o.pipe); left == 0 {
		return 0, io.EOF
	}
	_ = o.pipe.SetReadDeadline(time.Time{}) // there is data: this read does not block
	n, err = o.pipe.Read(b)
	_ = o.pipe.SetReadDeadline(time.Unix(1, 0))
	return n, err
}

// Lines returns every line printed so far.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// LastLines returns the last n lines printed so far, for an error message.
func (p *Proc) LastLines(n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines[max(0, len(p.lines)-n):]...)
}

// Output returns everything printed so far, for error messages.
func (p *Proc) Output() string { return strings.Join(p.Lines(), "\n") }

// ReportLine is the last drain report line the process printed (slog's
// JSON form, see [Proc.DrainTime]), if it printed one.
func (p *Proc) ReportLine() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reportLine, p.reportLine != ""
}

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
			return "", fmt.Errorf("harness: %s exited before printing %q; output:\n%s", p.Name, s, tail(p.Output()))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return "", fmt.Errorf("harness: %s printed no %q: %w; output:\n%s", p.Name, s, ctx.Err(), tail(p.Output()))
		}
	}
}

// Signal sends sig to the process (not its group: an orchestrator signals
// the container's main process); the first SIGTERM's time is kept as the
// start of the process's drain.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	if sig == syscall.SIGTERM && p.termAt.IsZero() {
		p.termAt = time.Now()
	}
	p.mu.Unlock()
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("harness: signal %s to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Kill ends the process and its group at once (SIGKILL) and waits for it.
// It is safe to call more than once, and after the process exited.
func (p *Proc) Kill() {
	p.mu.Lock()
	if !p.reaped {
		killGroup(p.cmd.Process)
	}
	p.mu.Unlock()
	_ = p.cmd.Process.Kill() // where groups are not killed; fails once it exited
	<-p.done
}

// Done is closed once the process has exited and everything it wrote was
// read. A descendant that left its group (setsid) and holds the output
// open does not delay it; what that one writes after the exit is not
// read, and fails (EPIPE; a Go program's write to its stdout or stderr
// then ends it with SIGPIPE).
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit and returns its exit code (-1 when a
// signal ended it).
func (p *Proc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done: // an exit wins over a context that ended too
		return p.cmd.ProcessState.ExitCode(), nil
	default:
	}
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("harness: %s did not exit: %w; output:\n%s", p.Name, ctx.Err(), tail(p.Output()))
	}
}

// ExitState describes how the process ended, such as "exit status 1" or
// "signal: killed"; empty while it runs.
func (p *Proc) ExitState() string {
	select {
	case <-p.done:
		return p.cmd.ProcessState.String()
	default:
		return ""
	}
}

// Exited reports whether the process has exited, and when: the time the
// harness saw the kernel report its exit, which may come before its last
// output was read (see [Proc.Done]). It is an upper bound, late by the
// harness's own scheduling latency: with thousands of busy goroutines on
// a loaded machine, a goroutine waits for a CPU for over a second at the
// 99.9th percentile (runtime/metrics /sched/latencies:seconds, measured in
// the e2e streams scenario), and the one that reaps is no exception.
func (p *Proc) Exited() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitAt, !p.exitAt.IsZero()
}

// DrainTime is the time from the first SIGTERM to the exit; zero if either
// did not happen. The exit is timed by the process's own clock where it
// can be: the time of its drain report line, the last thing a drainkit
// service does before it exits, if that came after the SIGTERM. Otherwise
// (no report: killed, crashed, refused to start, not a drainkit service)
// it is the harness's [Proc.Exited], late by the harness's latency. Call
// it once the process is done ([Proc.Wait]), so that every line has been
// read.
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

// Pid is the process id; the process leads a group of the same id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// tail keeps the end of a long output for an error message.
func tail(s string) string {
	const max = 8000
	if len(s) > max {
		return "…" + s[len(s)-max:]
	}
	return s
}
