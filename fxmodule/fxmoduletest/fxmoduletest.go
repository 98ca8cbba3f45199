// Package fxmoduletest runs, in a test, an fx app that includes
// fxmodule.Module, exactly as fxmodule.Run runs it in production: the same
// start, the same drain, the same report. It is what fxtest is for plain fx
// apps, which Module refuses to run under.
//
// # Usage
//
//	cfg := lifecycle.Config{Service: "room-service"}
//	app := fxmoduletest.Start(t, fxmodule.Module, fx.Supply(cfg), fx.Provide(fxmodule.AsHook(newFlushHook)))
//	// … exercise the running app …
//	r := app.Stop() // SIGTERM, then the drain
//	hook, _ := r.Hook("store.flush") // by the hook's Name, not its phase
//	if hook.Outcome != drain.OK { … }
//
// The report says which hooks ran, in which phase and order, with which
// outcome and for how long, fx's OnStop hooks included.
//
// # Time
//
// drainkit and fx read the standard clock only, so Start inside
// testing/synctest.Test runs the app on the bubble's fake clock: a
// DRAIN_DELAY of 5 s costs no real time. An app that listens (fxmodule.HTTP,
// Admin, fxgrpc) waits on the real network, which never lets that clock
// move: Start fails such a test at once, naming the goroutine. Test it on
// the real clock, with a short DrainDelay.
package fxmoduletest

import (
	"os"
	"syscall"
	"testing"

	"go.uber.org/fx"

	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/lifecycle"
)

// App is an app started by [Start].
type App struct {
	t       testing.TB
	m       *lifecycle.Manager
	signals chan os.Signal
	sent    int // signals sent by Signal
	exited  chan int
	report  *lifecycle.Report
}

// Start runs an app made of opts with fxmodule.Run in the background, with
// signals sent by the test instead of the process's, and returns once the
// app is Running (every OnStart hook returned). It fails the test if the
// app exits first, or if, inside a testing/synctest bubble, it waits on
// the real network there (see Time). An app still running when the test
// ends is stopped by the test's cleanup.
func Start(t testing.TB, opts ...fx.Option) *App {
	t.Helper()
	a := &App{t: t, signals: make(chan os.Signal, 3), exited: make(chan int, 1)}
	running := make(chan struct{})
	watchRunning := fx.Invoke(func(m *lifecycle.Manager) {
		a.m = m
		m.OnTransition(func(tr lifecycle.Transition) {
			if tr.To == lifecycle.Running {
				close(running)
			}
		})
	})
	testSignals := fx.Supply(fx.Annotated{Name: "drainkit.signals", Target: (<-chan os.Signal)(a.signals)})
	go func() { a.exited <- fxmodule.Run(append(opts, watchRunning, testSignals)...) }()
	select {
	case <-running:
	case code := <-a.exited:
		t.Fatalf("fxmoduletest: the app exited with code %d before it was running", code)
	}
	if g := clockBlocker(); g != "" {
		// A forced drain waits for no timer: it closes the servers at
		// once, which ends the wait on the network.
		a.Signal()
		a.Signal()
		a.Wait()
		t.Fatalf("fxmoduletest: the app cannot run on testing/synctest's fake clock: %s waits on real network I/O inside the bubble, "+
			"and the bubble's clock stands still while it waits, so the drain would hang; "+
			"call Start outside synctest.Test (with a short DrainDelay), or leave the servers that listen (fxmodule.HTTP, Admin, fxgrpc) out of a test on the fake clock", g)
	}
	t.Cleanup(func() {
		switch {
		case a.report != nil:
		case a.sent == 0:
			a.Stop()
		default:
			a.Wait() // the test's own signal is draining it; another would force it
		}
	})
	return a
}

// Manager returns the app's lifecycle manager.
func (a *App) Manager() *lifecycle.Manager { return a.m }

// Signal sends the app SIGTERM: the first drains, a second forces the
// drain; a third would leave the drain running past the test, so Signal
// fails the test instead. It returns once the signal is sent, possibly before the flip to
// Draining: a test of the flip waits for it through Manager().OnTransition.
func (a *App) Signal() {
	a.t.Helper()
	if a.sent == 2 {
		a.t.Fatal("fxmoduletest: a third signal would return at once and leave the drain running past the test")
	}
	a.sent++
	a.signals <- syscall.SIGTERM
}

// Wait waits for the app to exit and returns its report; the report's
// ExitCode is what fxmodule.Run returned.
func (a *App) Wait() *lifecycle.Report {
	a.t.Helper()
	if a.report != nil {
		return a.report
	}
	code := <-a.exited
	a.report = a.m.Report() // Run has returned: the drain has finished
	if a.report == nil {
		a.t.Fatalf("fxmoduletest: the app exited with code %d without a drain report", code)
	}
	if a.report.ExitCode != code {
		a.t.Errorf("fxmoduletest: exit code %d; the report says %d", code, a.report.ExitCode)
	}
	return a.report
}

// Stop sends SIGTERM and returns the report once the app has exited.
func (a *App) Stop() *lifecycle.Report {
	a.t.Helper()
	a.Signal()
	return a.Wait()
}
