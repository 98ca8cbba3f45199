package readiness

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/drainkit/drainkit/lifecycle"
)

// Report is the answer to one live or ready probe.
type Report struct {
	// Status is StatusOK, StatusDegraded or StatusFail.
	Status string
	// Reason says why a probe failed without running checks, e.g.
	// "draining" or "starting"; empty otherwise.
	Reason string
	// State is the lifecycle state the probe was answered in: a reader
	// that acts on it (the gRPC health bridge latches NOT_SERVING once
	// Draining) compares this, never Reason's text. Stopped once the
	// registry is closed; Starting in a zero Registry's answer.
	State lifecycle.State
	// Service and NodeID say who answered (from [Config]).
	Service string
	NodeID  string
	// Time is when the report was made.
	Time time.Time
	// Checks holds every check's (or heartbeat's) latest result.
	Checks []CheckResult
}

// CheckResult is the latest result of one check or heartbeat.
type CheckResult struct {
	// Name is the check's (or heartbeat's) name.
	Name string
	// Tier is "gating", "informational" or, for heartbeats, "liveness".
	Tier string
	// Status is StatusOK or StatusFail; a stale heartbeat's is StatusFail
	// while draining too, when it only makes the report StatusDegraded.
	Status string
	// Message is a short, credential-free error text; empty when ok.
	Message string
	// Duration is how long the check ran (or was waited for).
	Duration time.Duration
	// Age is how old the result is.
	Age time.Duration
}

// failed returns the names of the failing checks, gating first: the
// failed_check of a transition log line.
func (r *Report) failed() []string {
	var names []string
	for _, tier := range []string{Gating.String(), Informational.String(), tierLiveness} {
		for _, c := range r.Checks {
			if c.Status == StatusFail && c.Tier == tier {
				names = append(names, c.Name)
			}
		}
	}
	return names
}

const tierLiveness = "liveness"

// marshal encodes the report as JSON with a trailing newline, the fields in
// the order docs/readiness.md lists; without verbose only failing checks
// are listed. It appends to one buffer rather than reflect over a struct,
// since a probe is answered many times a second on every replica;
// appendString writes strings as json.Marshal does, so the bytes are the same.
func (r *Report) marshal(verbose bool) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"status":`...)
	b = appendString(b, r.Status)
	if r.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, r.Reason)
	}
	b = append(b, `,"service":`...)
	b = appendString(b, r.Service)
	b = append(b, `,"node_id":`...)
	b = appendString(b, r.NodeID)
	b = append(b, `,"time_unix_ms":`...)
	b = strconv.AppendInt(b, r.Time.UnixMilli(), 10)
	listed := 0
	for _, c := range r.Checks {
		if !verbose && c.Status != StatusFail {
			continue
		}
		if listed == 0 {
			b = append(b, `,"checks":[`...)
		} else {
			b = append(b, ',')
		}
		listed++
		b = append(b, `{"name":`...)
		b = appendString(b, c.Name)
		b = append(b, `,"tier":`...)
		b = appendString(b, c.Tier)
		b = append(b, `,"status":`...)
		b = appendString(b, c.Status)
		if c.Message != "" {
			b = append(b, `,"message":`...)
			b = appendString(b, c.Message)
		}
		b = append(b, `,"duration_ms":`...)
		b = strconv.AppendInt(b, c.Duration.Milliseconds(), 10)
		b = append(b, `,"age_ms":`...)
		b = strconv.AppendInt(b, c.Age.Milliseconds(), 10)
		b = append(b, '}')
	}
	if listed > 0 {
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// appendString appends s as a JSON string. Printable ASCII that
// json.Marshal writes unchanged is copied; anything else (quotes,
// backslashes, control bytes, <, > and &, which json.Marshal escapes for
// HTML, non-ASCII) goes through json.Marshal itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
