package readiness

import "net/http"

// Exported for tests only: the handlers Mount serves, one at a time, and
// the helpers behind bodies and transition logs.

func (r *Registry) ReadyHandler() http.Handler { return r.readyHandler() }
func (r *Registry) LiveHandler() http.Handler  { return r.liveHandler() }
func (r *Registry) Live() Report               { return r.live() }
func (r *Report) Failed() []string             { return r.failed() }

var Redact = redact

// SetProbeStarting replaces the hook an execution's goroutine runs before
// it calls Probe, until the returned function restores it.
func SetProbeStarting(f func(name string)) (restore func()) {
	old := probeStarting
	probeStarting = f
	return func() { probeStarting = old }
}

// SetClockTicking replaces the hook the registry's clock runs before each
// tick, until the returned function restores it.
func SetClockTicking(f func()) (restore func()) {
	old := clockTicking
	clockTicking = f
	return func() { clockTicking = old }
}

// Validate is what New refuses a config with.
func (c Config) Validate() error { return c.validate() }
