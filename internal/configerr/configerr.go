// Package configerr is drainkit's one configuration-error type: an error
// that matches lifecycle.ErrConfig (fxmodule.Run's exit 78) and reads as
// the error it carries. Every package of the module refuses a mistake in
// how the app is put together with it, so the same mistake gives the same
// exit code whichever package finds it.
package configerr

import (
	"errors"
	"fmt"
)

// ErrConfig is lifecycle.ErrConfig: declared here, below every package
// that wraps with it, and exported there.
var ErrConfig = errors.New("lifecycle: bad configuration")

type wrapped struct{ err error }

func (e wrapped) Error() string        { return e.err.Error() }
func (e wrapped) Unwrap() error        { return e.err }
func (e wrapped) Is(target error) bool { return target == ErrConfig }

// Wrap makes err match ErrConfig without changing its text; nil stays nil.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return wrapped{err}
}

// Errorf is Wrap(fmt.Errorf(format, args...)).
func Errorf(format string, args ...any) error { return wrapped{fmt.Errorf(format, args...)} }
