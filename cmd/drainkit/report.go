package main

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// drainReport is the part of a drainkit drain report the drill shows: the
// "report" of the line lifecycle logs last, "drain report", in slog's JSON
// form or a text form (where the report is one quoted JSON value).
type drainReport struct {
	Reason string `json:"reason"`
	// Start is the stop request, the drain's beginning: the flip.
	Start            time.Time    `json:"start"`
	Duration         float64      `json:"duration_ms"`
	ExitCode         int          `json:"exit_code"`
	Forced           bool         `json:"forced"`
	DeadlineExceeded bool         `json:"deadline_exceeded"`
	Hooks            []hookReport `json:"hooks"`
	// Arrivals is what reached the instance after its flip (drainkit's
	// lifecycle reports it; absent from an older report).
	Arrivals *arrivals `json:"arrivals,omitempty"`
}

// arrivals is the report's measure of the propagation delay.
type arrivals struct {
	AfterFlip          int     `json:"after_flip"`
	LastAfterFlipMS    float64 `json:"last_after_flip_ms"`
	RefusedAfterIntake int     `json:"refused_after_intake"`
}

// hookReport is one hook of a drain report.
type hookReport struct {
	Name    string `json:"name"`
	Phase   string `json:"phase"`
	Outcome string `json:"outcome"`
	// Start is when the hook began, in milliseconds from the report's
	// Start; nil if it never ran.
	Start    *float64 `json:"start_ms,omitempty"`
	Duration float64  `json:"duration_ms"`
	Error    string   `json:"error,omitempty"`
}

// findReport returns the last drain report among lines, or nil.
func findReport(lines []string) *drainReport {
	for i := len(lines) - 1; i >= 0; i-- {
		if r := parseReport(lines[i]); r != nil {
			return r
		}
	}
	return nil
}

// parseReport reads a drain report line, or returns nil.
func parseReport(line string) *drainReport {
	if !strings.Contains(line, "drain report") {
		return nil
	}
	var raw json.RawMessage
	if strings.HasPrefix(line, "{") {
		var l struct {
			Msg    string          `json:"msg"`
			Report json.RawMessage `json:"report"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "drain report" {
			return nil
		}
		raw = l.Report
	} else {
		// slog's text handler (… msg="drain report" … report="{\"reason\":…}")
		// or its default logger (… INFO drain report … report="{…}").
		if !strings.Contains(line, `msg="drain report"`) && !strings.Contains(line, " drain report ") {
			return nil
		}
		_, v, ok := strings.Cut(line, " report=")
		if !ok {
			return nil
		}
		q, err := strconv.QuotedPrefix(v)
		if err != nil {
			return nil
		}
		s, err := strconv.Unquote(q)
		if err != nil {
			return nil
		}
		raw = json.RawMessage(s)
	}
	var r drainReport
	if len(raw) == 0 || json.Unmarshal(raw, &r) != nil {
		return nil
	}
	return &r
}

// phaseEnd returns when phase ended, from the report's Start: the latest
// start_ms + duration_ms of its hooks; false if none of them ran (or the
// report predates start_ms). Intake has closed when stop_intake ends: an
// HTTP intake's hook closes it at once, grpcdrain's after its settle.
func (r *drainReport) phaseEnd(phase string) (time.Duration, bool) {
	last, ran := 0.0, false
	for _, h := range r.Hooks {
		if h.Phase == phase && h.Start != nil {
			last, ran = max(last, *h.Start+h.Duration), true
		}
	}
	return time.Duration(math.Round(last*1000)) * time.Microsecond, ran // the JSON's precision
}

// duration is a time.Duration that marshals as milliseconds.
type duration time.Duration

// MarshalJSON writes d in milliseconds, to the microsecond.
func (d duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(time.Duration(d).Microseconds()) / 1000)
}

// String is d rounded to the millisecond.
func (d duration) String() string { return time.Duration(d).Round(time.Millisecond).String() }

// ms renders milliseconds as a duration.
func ms(v float64) string {
	d := time.Duration(v * float64(time.Millisecond))
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}
