package readiness

import (
	"encoding/json"
	"time"
)

// Report is the answer to one live or ready probe.
type Report struct {
	// Status is ok, degraded or fail.
	Status Status
	// Reason says why a probe failed without running checks, e.g.
	// "draining" or "starting"; empty otherwise.
	Reason string
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
	// Status is ok or fail (degraded for a stale heartbeat while draining).
	Status Status
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

// body is the JSON shape of a Report: the fields probers and operators read.
type body struct {
	Status     Status      `json:"status"`
	Reason     string      `json:"reason,omitempty"`
	Service    string      `json:"service"`
	NodeID     string      `json:"node_id"`
	TimeUnixMS int64       `json:"time_unix_ms"`
	Checks     []checkBody `json:"checks,omitempty"`
}

type checkBody struct {
	Name       string `json:"name"`
	Tier       string `json:"tier"`
	Status     Status `json:"status"`
	Message    string `json:"message,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	AgeMS      int64  `json:"age_ms"`
}

// marshal encodes the report; without verbose only failing checks are listed
// (a failure is never hidden, a success is not repeated on every probe).
func (r *Report) marshal(verbose bool) ([]byte, error) {
	b := body{
		Status:     r.Status,
		Reason:     r.Reason,
		Service:    r.Service,
		NodeID:     r.NodeID,
		TimeUnixMS: r.Time.UnixMilli(),
	}
	for _, c := range r.Checks {
		if !verbose && c.Status != StatusFail {
			continue
		}
		b.Checks = append(b.Checks, checkBody{
			Name:       c.Name,
			Tier:       c.Tier,
			Status:     c.Status,
			Message:    c.Message,
			DurationMS: c.Duration.Milliseconds(),
			AgeMS:      c.Age.Milliseconds(),
		})
	}
	return json.Marshal(b)
}
