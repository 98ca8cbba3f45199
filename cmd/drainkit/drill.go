package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/drainkit/drainkit/internal/harness"
)

// runDrill is "drainkit drill": it parses args, runs the drill, writes the
// verdict and returns the exit code.
func runDrill(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseDrill(args, stdout)
	if errors.Is(err, errHelp) {
		return exitPass
	}
	if err != nil {
		fmt.Fprintf(stderr, "drainkit drill: %v\nRun \"drainkit drill -h\" for the flags.\n", err)
		return exitCantRun
	}
	var progress io.Writer
	if isTerminal(stderr) {
		progress = stderr
	}
	v, err := drill(ctx, cfg, progress)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "drainkit drill: interrupted; every process it started was stopped")
		return exitCantRun
	}
	if err != nil {
		fmt.Fprintf(stderr, "drainkit drill: %v\n", err)
		return exitCantRun
	}
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			fmt.Fprintf(stderr, "drainkit drill: %v\n", err)
			return exitCantRun
		}
	} else {
		fmt.Fprint(stdout, v.table())
	}
	if v.Pass {
		return exitPass
	}
	return exitFail
}

// isTerminal reports whether w is a terminal, where a live progress line
// helps rather than litters.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// drill runs one drill. Whatever it started is stopped by the time it
// returns. An error means the drill could not run.
func drill(ctx context.Context, cfg *drillConfig, progress io.Writer) (*verdict, error) {
	dir, err := os.MkdirTemp("", "drainkit-drill")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var ports harness.Ports
	defer ports.Close()
	insts, err := newInstances(cfg, &ports)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, in := range insts {
			if in.proc != nil {
				in.proc.Kill()
			}
		}
	}()
	fe, err := startFrontend(ctx, cfg, dir, &ports, insts)
	if err != nil {
		return nil, err
	}
	defer fe.close()
	if err := startOld(ctx, cfg, fe, insts); err != nil {
		return nil, err
	}

	c, err := fe.caller(cfg)
	if err != nil {
		return nil, err
	}
	defer c.close()
	if cfg.GRPC {
		if err := probeCall(ctx, cfg, c); err != nil {
			return nil, err
		}
	}
	bound := cfg.loadBound()
	l := newLoad(cfg, c, bound)
	p := &phase{}
	if progress != nil {
		stop := showProgress(progress, l, p)
		defer stop()
	}
	until := make(chan struct{})
	loadCtx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	type loaded struct {
		outcomes []outcome
		sent     harness.Sent
	}
	done := make(chan loaded, 1)
	go func() {
		o, s := l.run(loadCtx, bound, until)
		done <- loaded{o, s}
	}()
	received := false
	defer func() { // the load is stopped and waited for on every return
		if !received {
			cancelLoad()
			<-done
		}
	}()

	p.set("warm-up")
	if err := pause(ctx, cfg.Warmup); err != nil {
		return nil, err
	}
	u, err := roll(ctx, cfg, fe, insts, p)
	if err != nil {
		return nil, err
	}
	p.set("tail")
	if cfg.Duration == 0 {
		if err := pause(ctx, cfg.Tail); err != nil {
			return nil, err
		}
		close(until)
	}
	res := <-done
	received = true
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	v := judge(cfg, fe, c, insts, u, res.outcomes, res.sent)
	if cfg.HTML != "" {
		if err := writeHTML(cfg.HTML, &picture{v: v, outcomes: res.outcomes, lives: lives(insts, u), update: u}); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// lives are the instances' lives for -html: the old ones, then the new.
func lives(insts []*instance, u *update) []life {
	var out []life
	for i, in := range insts {
		if in.proc == nil {
			continue // never started: the drill failed before it
		}
		l := life{name: in.name, started: in.startedAt, ready: in.readyAt}
		if i < len(u.old) {
			s := u.old[i]
			l.old, l.sigterm, l.removed, l.exited = true, s.sigterm, s.removed, s.exited
			if s.Report != nil && !s.Report.Start.IsZero() {
				l.flip = s.Report.Start
				if d, ok := s.Report.phaseEnd("stop_intake"); ok {
					l.intake = l.flip.Add(d)
				}
			}
		}
		out = append(out, l)
	}
	return out
}

// probeCall makes one call of -call before the load starts: a method the
// instances do not serve, or -request bytes they cannot decode, is bad
// input (exit 2), not a failed update.
func probeCall(ctx context.Context, cfg *drillConfig, c caller) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var o outcome
	c.call(ctx, 0, &o)
	if o.cause == "" {
		return nil
	}
	return fmt.Errorf("-call %s with -request %x: the first call, before the update, failed: %s", cfg.Call, cfg.Request, o.err)
}

// pause waits d, a length of the drill (not a wait for a condition), or
// until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
}

// startOld starts the first -n instances at once, as a Deployment's first
// pods start, waits until each is ready and in the balancer, and until the
// balancer holds the rest out.
func startOld(ctx context.Context, cfg *drillConfig, fe frontend, insts []*instance) error {
	n := cfg.Instances
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i, in := range insts[:n] {
		wg.Go(func() {
			if errs[i] = in.start(ctx, cfg); errs[i] == nil {
				errs[i] = fe.admit(ctx, i)
			}
		})
	}
	for i := n; i < 2*n; i++ {
		wg.Go(func() { errs[i] = fe.absent(ctx, i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// update is what the rolling update did.
type update struct {
	start, end time.Time
	old        []stopped
}

// roll replaces every old instance in turn, as a Deployment with maxSurge
// 1 and maxUnavailable 0: start a new instance, wait until it is ready and
// in the balancer, SIGTERM an old one, wait for its exit (SIGKILL after
// -grace). The update ends when the last old instance has exited and left
// the balancer, whichever is later.
func roll(ctx context.Context, cfg *drillConfig, fe frontend, insts []*instance, p *phase) (*update, error) {
	n := cfg.Instances
	u := &update{start: time.Now()}
	var lastLeave time.Time
	for k := range n {
		old, neu := insts[k], insts[n+k]
		p.set(fmt.Sprintf("update %d/%d: starting %s", k+1, n, neu.name))
		if err := neu.start(ctx, cfg); err != nil {
			return nil, err
		}
		if err := fe.admit(ctx, n+k); err != nil {
			return nil, err
		}
		p.set(fmt.Sprintf("update %d/%d: %s draining", k+1, n, old.name))
		s, err := old.terminate(ctx, cfg.Grace, func(at time.Time) time.Time {
			leave := fe.terminating(k, at)
			lastLeave = latest(lastLeave, leave)
			return leave
		})
		if err != nil {
			return nil, err
		}
		u.old = append(u.old, s)
	}
	if err := pause(ctx, time.Until(lastLeave)); err != nil { // the modelled endpoint lag
		return nil, err
	}
	u.end = time.Now()
	return u, nil
}

// phase is what the drill is doing, for the progress line.
type phase struct {
	mu  sync.Mutex
	now string
}

func (p *phase) set(s string) {
	p.mu.Lock()
	p.now = s
	p.mu.Unlock()
}

func (p *phase) get() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.now
}

// showProgress rewrites one line on w twice a second until the returned
// function is called, which waits for it and clears the line.
func showProgress(w io.Writer, l *load, p *phase) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	began := time.Now()
	go func() {
		defer close(done)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			fmt.Fprintf(w, "\r\033[K%5.1fs  sent %d  ok %d  failed %d  %s",
				time.Since(began).Seconds(), l.sent.Load(), l.ok.Load(), l.failed.Load(), p.get())
			select {
			case <-quit:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(quit); <-done }
}
