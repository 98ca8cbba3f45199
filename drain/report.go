package drain

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Outcome is how one hook ended, as reports, logs and metric labels show it.
type Outcome string

// The outcomes a hook can have.
const (
	// OK: Run returned nil.
	OK Outcome = "ok"
	// Failed: Run returned an error while its context was live, its Abort
	// panicked, or it failed [Hook.Validate] and never ran; Error says which.
	Failed Outcome = "failed"
	// TimedOut: a budget (its Timeout or the drain deadline) ran out while
	// the hook ran; Stack says where an abandoned one was.
	TimedOut Outcome = "timeout"
	// Canceled: the drain was forced while the hook ran, and its Run was not
	// waited for; Stack says where an abandoned one was.
	Canceled Outcome = "canceled"
	// Skipped: the hook never ran, because the deadline passed or the drain
	// was forced before its phase began; Start and Duration are zero.
	Skipped Outcome = "skipped"
	// Panicked: Run panicked; the panic was recovered and the drain went on.
	Panicked Outcome = "panic"
)

// HookResult is the report of one hook. It marshals to JSON as part of
// its [Report].
type HookResult struct {
	// Name and Phase are the hook's.
	Name  string `json:"name"`
	Phase Phase  `json:"phase"`
	// Outcome is how the hook ended.
	Outcome Outcome `json:"outcome"`
	// Start is when it began, zero if it never ran. JSON: start_ms, in
	// milliseconds from the [Report]'s Start (so that a reader of one line
	// can place the hook without a clock), left out when the hook never
	// ran: a hook that began with the report has 0, not nothing.
	Start time.Time `json:"-"`
	// Duration is how long the runner waited for it (duration_ms in JSON).
	Duration time.Duration `json:"-"`
	// Error is the error text, the panic value, or why the hook was cut off.
	Error string `json:"error,omitempty"`
	// Stack is the goroutine stack of a hook that was still running when it
	// was abandoned, or of a panic.
	Stack string `json:"stack,omitempty"`
	// Streams is what the close hook of [Streams] did with its streams.
	Streams *StreamReport `json:"streams,omitempty"`
}

// Report says what a drain did. It marshals to one JSON object.
type Report struct {
	// Reason is why the drain ran, e.g. "signal: terminated".
	Reason string `json:"reason"`
	// Start is when it began (for lifecycle: the stop request) and
	// Duration how long it took (duration_ms in JSON).
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"-"`
	// Forced is set when the drain was cut short by cancellation (a second
	// signal) rather than by its deadline.
	Forced bool `json:"forced"`
	// DeadlineExceeded is set when the drain deadline passed before every
	// hook had returned.
	DeadlineExceeded bool `json:"deadline_exceeded"`
	// Hooks has one result per hook, in phase order.
	Hooks []HookResult `json:"hooks"`
}

// MarshalJSON encodes the report as one object with the json tags above,
// each duration as duration_ms and a hook's Start as start_ms (floats,
// microsecond precision).
func (r *Report) MarshalJSON() ([]byte, error) {
	type plainHook HookResult
	type hookJSON struct {
		plainHook
		StartMS    *float64 `json:"start_ms,omitempty"`
		DurationMS float64  `json:"duration_ms"`
	}
	type plain Report
	hooks := make([]hookJSON, len(r.Hooks))
	for i, h := range r.Hooks {
		hooks[i] = hookJSON{plainHook: plainHook(h), DurationMS: ms(h.Duration)}
		if !h.Start.IsZero() {
			start := ms(h.Start.Sub(r.Start))
			hooks[i].StartMS = &start
		}
	}
	return json.Marshal(struct {
		*plain
		Hooks      []hookJSON `json:"hooks"` // shadows plain's: one marshaller for the whole line
		DurationMS float64    `json:"duration_ms"`
	}{(*plain)(r), hooks, ms(r.Duration)})
}

// Hook returns the result of the hook named name.
func (r *Report) Hook(name string) (HookResult, bool) {
	for _, h := range r.Hooks {
		if h.Name == name {
			return h, true
		}
	}
	return HookResult{}, false
}

// Err joins one error per hook that did not end OK, or returns nil.
func (r *Report) Err() error {
	var errs []error
	for _, h := range r.Hooks {
		if h.Outcome != OK {
			errs = append(errs, fmt.Errorf("%s hook %q: %s: %s", h.Phase, h.Name, h.Outcome, h.Error))
		}
	}
	return errors.Join(errs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// abortPanicked notes on result i that its hook's Abort panicked.
func (r *Report) abortPanicked(i int, v string) {
	h := &r.Hooks[i]
	if h.Outcome == OK {
		h.Outcome = Failed
	}
	h.Error = strings.TrimPrefix(h.Error+"; abort panicked: "+v, "; ")
}
