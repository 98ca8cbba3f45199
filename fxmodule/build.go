package fxmodule

import (
	"errors"
	"log/slog"
	"strings"

	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/drainkit/drainkit/lifecycle"
)

// refuseToBuild logs, in one line, why fx could not build the app, and
// returns the exit code.
func refuseToBuild(err error) int {
	why, code := buildFailure(err)
	if code == lifecycle.ExitConfig {
		slog.Error("fxmodule: refusing to start: bad configuration", "err", why, "exit_code", code)
	} else {
		slog.Error("fxmodule: cannot build the app", "err", why, "exit_code", code)
	}
	return code
}

// buildFailure says in one line why fx could not build the app, and the
// exit code: ExitConfig for a mistake in the options or the graph,
// ExitStartFailed for a constructor that failed on the world.
func buildFailure(err error) (string, int) {
	if mistake := configCause(err); mistake != nil {
		return mistake.Error(), lifecycle.ExitConfig
	}
	root := dig.RootCause(err)
	if optionMisplaced(root) {
		return root.Error(), lifecycle.ExitConfig
	}
	var graph dig.Error
	if !errors.As(root, &graph) {
		return err.Error(), lifecycle.ExitStartFailed // with fx's words: which constructor failed
	}
	if types := missingTypes(root); len(types) > 0 {
		return missingAdvice(types, err), lifecycle.ExitConfig
	}
	return err.Error(), lifecycle.ExitConfig
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

// optionMisplaced reports whether fx refused an option for where it was
// given (fx.StopTimeout inside an fx.Module). fx exports no error for it,
// so its message is read.
func optionMisplaced(root error) bool {
	return strings.Contains(root.Error(), " should be passed to ")
}

// missingTypes lists the types of dig's "missing type" error, or none for
// another error. dig exports no type for it, so its message is read; a
// change of it loses only the advice, not the exit code.
func missingTypes(root error) []string {
	msg := root.Error()
	for _, prefix := range []string{"missing types: ", "missing type: "} {
		if rest, ok := strings.CutPrefix(msg, prefix); ok {
			var types []string
			for _, t := range strings.Split(rest, "; ") {
				t, _, _ = strings.Cut(t, " (did you mean")
				types = append(types, t)
			}
			return types
		}
	}
	return nil
}

// missingAdvice says what to add for the types nothing provides: the two
// that drainkit's options need are the ones a new app forgets.
func missingAdvice(types []string, err error) string {
	for _, t := range types {
		switch t {
		case "*lifecycle.Manager", "*readiness.Registry", "*drain.Tracker", "*fxmodule.nameOwners":
			return "fxmodule: the app has no " + t + ": add fxmodule.Module to fxmodule.Run's options"
		}
	}
	for _, t := range types {
		if t == "lifecycle.Config" {
			return "fxmodule: the app has no lifecycle.Config: add fxmodule.FromEnv (SERVICE_NAME, DRAIN_TIMEOUT, …) or fx.Supply(lifecycle.Config{…}) to fxmodule.Run's options"
		}
	}
	// dig's innermost words name the function that needs the types.
	return "fxmodule: nothing provides " + strings.Join(types, ", ") + ": add an fx.Provide or fx.Supply of it (" + innermostMissing(err) + ")"
}

// innermostMissing is the message of the deepest error in err's chain that
// has an Unwrap, i.e. dig's "missing dependencies for function …".
func innermostMissing(err error) string {
	msg := err.Error()
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Unwrap(e) != nil {
			msg = e.Error()
		}
	}
	return msg
}

// eventLogger is fx's event logger under Run: the stop recorder, with
// build errors at debug level, since Run logs them in one line itself.
func eventLogger(rec *stopRecorder) fx.Option {
	return fx.WithLogger(func(p loggerParams) fxevent.Logger {
		rec.next = slogEvents(p)
		debug := &fxevent.SlogLogger{Logger: logger(p.Logger)}
		debug.UseLogLevel(slog.LevelDebug)
		debug.UseErrorLevel(slog.LevelDebug)
		return quietBuild{rec: rec, debug: debug}
	})
}

type quietBuild struct {
	rec   *stopRecorder
	debug fxevent.Logger
}

func (q quietBuild) LogEvent(e fxevent.Event) {
	if buildError(e) {
		q.debug.LogEvent(e)
		return
	}
	q.rec.LogEvent(e)
}

// buildError reports whether e is an error of building the graph.
func buildError(e fxevent.Event) bool {
	switch e := e.(type) {
	case *fxevent.Provided:
		return e.Err != nil
	case *fxevent.Supplied:
		return e.Err != nil
	case *fxevent.Decorated:
		return e.Err != nil
	case *fxevent.Replaced:
		return e.Err != nil
	case *fxevent.Run:
		return e.Err != nil
	case *fxevent.Invoked:
		return e.Err != nil
	}
	return false
}
