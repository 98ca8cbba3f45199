package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// handleSignals subscribes to SIGTERM and SIGINT (or the test's
// channel) and escalates: the first signal requests a stop, the second
// forces the drain, the third ends the process at once with [ExitForced].
// It returns a function that unsubscribes and waits for the watching
// goroutine to end.
func (m *Manager) handleSignals() (stop func()) {
	ch := m.signals
	var own chan os.Signal
	if ch == nil {
		own = make(chan os.Signal, 3)
		signal.Notify(own, syscall.SIGTERM, syscall.SIGINT)
		ch = own
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; ; n++ {
			var sig os.Signal
			select {
			case sig = <-ch:
			case <-quit:
				return
			}
			reason := "signal: " + sig.String()
			switch n {
			case 1:
				m.requestStop(reason)
			case 2:
				m.log.Warn("second signal: forcing the drain", "signal", sig.String())
				m.force(reason + " (second: forced)")
			default:
				m.log.Error("third signal: exiting now", "signal", sig.String(), "exit_code", ExitForced)
				m.exit(ExitForced)
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			if own != nil {
				signal.Stop(own)
			}
			close(quit)
			wg.Wait()
		})
	}
}

// Run is the whole life of a process without a framework: it handles
// signals, runs the OnStart steps, marks the process Running, waits for a
// signal or for ctx to end, drains, and returns the report. Pass the
// report's ExitCode to os.Exit.
//
// A signal during start-up cancels the step that is running, skips the
// rest, and drains whatever hooks the started steps had added. A step that
// fails does the same, and the report carries StartError and
// [ExitStartFailed].
func (m *Manager) Run(ctx context.Context) *Report {
	stopSignals := m.handleSignals()
	defer stopSignals()
	stopCtx := context.AfterFunc(ctx, func() { m.requestStop("context: " + context.Cause(ctx).Error()) })
	defer stopCtx()

	startErr := m.start()
	if startErr == nil {
		if err := m.markRunning(); err == nil {
			<-m.stopReq.Done()
		}
	}
	reason := "start failed"
	if startErr != nil {
		reason += ": " + startErr.Error()
	}
	if errors.Is(startErr, errStartAborted) {
		startErr = nil // a signal's abort is a clean stop, not a failed start
	}
	return m.shutdownOnce(context.Background(), reason, startErr)
}

// start runs the OnStart steps with a context cancelled by a stop request.
func (m *Manager) start() error {
	m.mu.Lock()
	steps := append([]func(context.Context) error{}, m.starts...)
	m.mu.Unlock()
	ctx, cancel := m.withStop(context.Background())
	defer cancel()
	for i, step := range steps {
		if m.stopReq.Err() != nil {
			return errStartAborted
		}
		if err := step(ctx); err != nil {
			// Aborted only when the step gave up because of the stop
			// request; one that failed on its own (even if its failure
			// itself requested a stop, as a framework's rollback does)
			// is a failed start.
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				return errStartAborted
			}
			return fmt.Errorf("lifecycle: start step %d: %w", i+1, err)
		}
	}
	return nil
}
