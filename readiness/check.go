package readiness

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// Tier says what a check's failure does to readiness.
type Tier int

// The tiers of a [Check].
const (
	// Gating checks a hard dependency: its failure makes the process not ready.
	Gating Tier = iota
	// Informational checks an optional or shared dependency: its failure is
	// reported (body, logs, metrics) but never makes the process not ready.
	Informational
)

// String returns "gating" or "informational", as reported in bodies and labels.
func (t Tier) String() string {
	switch t {
	case Gating:
		return "gating"
	case Informational:
		return "informational"
	}
	return fmt.Sprintf("tier(%d)", int(t))
}

// Check is one readiness probe of a dependency.
type Check struct {
	// Name identifies the check in bodies, logs and metric labels; unique
	// and valid UTF-8.
	Name string
	// Tier says whether a failure gates readiness.
	Tier Tier
	// Timeout bounds one run of Probe, counted from when Probe is called
	// (not from when the evaluation began). Zero means [Config.CheckTimeout];
	// a negative timeout is rejected. The whole evaluation is further bounded
	// by [Config.ReadyTimeout].
	Timeout time.Duration
	// Probe reports whether the dependency is usable. It must honour ctx and
	// write nothing. A Probe that ignores ctx is abandoned at its timeout and
	// is not started again until it returns.
	Probe func(ctx context.Context) error
}

func (c Check) validate() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("readiness: check name is empty")
	case !utf8.ValidString(c.Name):
		// The name is a metric label, which Prometheus refuses with a panic.
		return fmt.Errorf("readiness: check %q: Name is not valid UTF-8", c.Name)
	case c.Probe == nil:
		return fmt.Errorf("readiness: check %q: Probe is nil", c.Name)
	case c.Timeout < 0:
		return fmt.Errorf("readiness: check %q: Timeout is %v; want a positive duration or zero for the default", c.Name, c.Timeout)
	case c.Tier != Gating && c.Tier != Informational:
		return fmt.Errorf("readiness: check %q: Tier is %v; want Gating or Informational", c.Name, c.Tier)
	}
	return nil
}

// The statuses of a [Report] and of each [CheckResult], as they appear in
// bodies and logs. Like CheckResult.Tier they are plain strings: a report
// is read, compared and printed, never built by the caller.
const (
	// StatusOK: ready (or live), every check passes.
	StatusOK = "ok"
	// StatusDegraded: ready, but an informational check fails.
	StatusDegraded = "degraded"
	// StatusFail: not ready (or not live).
	StatusFail = "fail"
)
