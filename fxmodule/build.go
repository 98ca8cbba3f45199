package fxmodule

import (
	"errors"
	"log/slog"

	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/drainkit/drainkit/lifecycle"
)

// refuseToBuild logs to log, in one line, why fx could not build the
// app, and returns the exit code.
func refuseToBuild(log *slog.Logger, err error) int {
	why, code := buildFailure(err)
	if code == lifecycle.ExitConfig {
		log.Error("fxmodule: refusing to start: bad configuration", "err", why, "exit_code", code)
	} else {
		log.Error("fxmodule: cannot build the app", "err", why, "exit_code", code)
	}
	return code
}

// buildFailure says in one line why fx could not build the app, and the
// exit code: ExitConfig for a mistake in the options or the graph,
// ExitStartFailed for a constructor that failed on the world. It reads
// only types fx and dig export: an error that matches lifecycle.ErrConfig
// is a mistake; so is one that is not dig's at all (fx refused an option,
// such as fx.StopTimeout inside an fx.Module), and one whose root cause is
// dig's own (a type nothing provides, a cycle); a root cause of another
// kind is a constructor's own failure. An fx.Invoke's own error cannot be
// told from fx's refusal of an option (both a bare error, unwrapped): it
// counts as a mistake, as docs/fxmodule.md says.
func buildFailure(err error) (string, int) {
	if mistake := configCause(err); mistake != nil {
		return mistake.Error(), lifecycle.ExitConfig
	}
	var graph dig.Error
	if !errors.As(err, &graph) || errors.As(dig.RootCause(err), &graph) {
		return err.Error(), lifecycle.ExitConfig
	}
	return err.Error(), lifecycle.ExitStartFailed // with fx's words: which constructor failed
}

// configCause is the innermost error in err's tree that matches
// lifecycle.ErrConfig, ErrConfig itself aside, or nil: the mistake in its
// own words, without fx's wrapping of it.
func configCause(err error) error {
	if !errors.Is(err, lifecycle.ErrConfig) {
		return nil
	}
	var inner []error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		inner = []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		inner = u.Unwrap()
	}
	for _, e := range inner {
		if c := configCause(e); c != nil {
			return c
		}
	}
	if err == lifecycle.ErrConfig {
		return nil // wrapped by the error that says what is wrong
	}
	return err
}

// eventLogger logs fx's events through the graph's *slog.Logger at debug
// level, build errors included, since Run logs them in one line itself,
// to the logger it stores in graphLog (fx builds it first, so a refusal
// to build goes there too). It is only a default: an app's own
// fx.WithLogger replaces it, and nothing of the drain reads an event.
func eventLogger(graphLog **slog.Logger) fx.Option {
	return fx.WithLogger(func(p loggerParams) fxevent.Logger {
		*graphLog = p.Logger
		l := &fxevent.SlogLogger{Logger: logger(p.Logger)}
		l.UseLogLevel(slog.LevelDebug)
		l.UseErrorLevel(slog.LevelDebug)
		return l
	})
}
