package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// drainReport is the part of a drainkit drain report the drill shows: the
// "report" of the line lifecycle logs last, "drain report", in slog's JSON
// form or a text form (where the report is one quoted JSON value).
type drainReport struct {
	Reason           string       `json:"reason"`
	Duration         float64      `json:"duration_ms"`
	ExitCode         int          `json:"exit_code"`
	Forced           bool         `json:"forced"`
	DeadlineExceeded bool         `json:"deadline_exceeded"`
	Hooks            []hookReport `json:"hooks"`
}

// hookReport is one hook of a drain report.
type hookReport struct {
	Name     string  `json:"name"`
	Phase    string  `json:"phase"`
	Outcome  string  `json:"outcome"`
	Duration float64 `json:"duration_ms"`
	Error    string  `json:"error,omitempty"`
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
