package lifecycle

import (
	"encoding/json"
	"time"

	"github.com/drainkit/drainkit/drain"
)

// Exit codes, one per outcome, so an orchestrator's record of the last
// termination says how the drain went.
const (
	// ExitClean: every hook finished in time.
	ExitClean = 0
	// ExitHookFailed: the drain finished in time but a hook failed,
	// panicked or overran its own timeout.
	ExitHookFailed = 1
	// ExitDeadline: DRAIN_TIMEOUT passed before the drain finished; the
	// report names the hooks that were abandoned.
	ExitDeadline = 3
	// ExitForced: a second signal cut the drain short (or a third made
	// [Manager.Run] return at once).
	ExitForced = 4
	// ExitStartFailed: a start step failed; what had started was drained.
	ExitStartFailed = 5
	// ExitConfig: the configuration was refused before anything started
	// (EX_CONFIG of sysexits.h).
	ExitConfig = 78
)

// Report is what one shutdown did: the drain report plus who drained and
// the exit code. It marshals to one JSON object.
type Report struct {
	*drain.Report
	// Service and NodeID say who drained (SERVICE_NAME, NODE_ID).
	Service string `json:"service"`
	NodeID  string `json:"node_id"`
	// StartError is the failed start step's error, if the start failed.
	StartError string `json:"start_error,omitempty"`
	// ExitCode is the process exit code for this outcome (Exit… constants).
	ExitCode int `json:"exit_code"`
	// ArrivedAfterFlip, LastArrivalAfterFlip and RefusedAfterIntake say
	// whether the propagation delay was long enough. They count the work
	// (requests, RPCs) that reached the [Manager.Tracker] after the flip,
	// refused or not; when the last of it arrived, from the flip (zero if
	// none did); and how much came after phase stop_intake and was refused
	// (HTTP 503, gRPC UNAVAILABLE), which a longer DRAIN_DELAY would have
	// served. Forwards from peers (drain.ForwardedHeader) are not counted:
	// they follow a room, not the balancers. JSON: "arrivals" {after_flip,
	// last_after_flip_ms, refused_after_intake}. docs/shutdown.md sets the
	// delay from them.
	ArrivedAfterFlip     uint64        `json:"-"`
	LastArrivalAfterFlip time.Duration `json:"-"`
	RefusedAfterIntake   uint64        `json:"-"`
}

// MarshalJSON is the drain report's object with the Report's own fields
// after its own (the embedded report's MarshalJSON would otherwise hide
// them), every value as its own marshaller wrote it.
func (r *Report) MarshalJSON() ([]byte, error) {
	type arrivals struct {
		AfterFlip          uint64  `json:"after_flip"`
		LastAfterFlipMS    float64 `json:"last_after_flip_ms"`
		RefusedAfterIntake uint64  `json:"refused_after_intake"`
	}
	own, err := json.Marshal(struct {
		Service    string   `json:"service"`
		NodeID     string   `json:"node_id"`
		StartError string   `json:"start_error,omitempty"`
		ExitCode   int      `json:"exit_code"`
		Arrivals   arrivals `json:"arrivals"`
	}{r.Service, r.NodeID, r.StartError, r.ExitCode,
		arrivals{r.ArrivedAfterFlip, msOf(r.LastArrivalAfterFlip), r.RefusedAfterIntake}})
	if err != nil || r.Report == nil {
		return own, err
	}
	drained, err := json.Marshal(r.Report)
	if err != nil {
		return nil, err
	}
	// Both are objects: the first one's closing brace joins the second's fields.
	return append(append(drained[:len(drained)-1], ','), own[1:]...), nil
}
