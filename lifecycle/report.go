package lifecycle

import (
	"encoding/json"
	"log"
	"log/slog"

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
	// ExitForced: a second signal cut the drain short (or a third ended
	// the process at once).
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
}

// MarshalJSON merges the drain report's fields with the Report's own (the
// embedded report's MarshalJSON would otherwise hide them).
func (r *Report) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.Report)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, err
	}
	obj["service"], obj["node_id"], obj["exit_code"] = r.Service, r.NodeID, r.ExitCode
	if r.StartError != "" {
		obj["start_error"] = r.StartError
	}
	return json.Marshal(obj)
}

// startFailed records that start-up failed with err: StartError is set,
// and the exit code becomes [ExitStartFailed] unless the drain's own
// outcome (deadline, forced) says more.
func (r *Report) startFailed(err error) {
	r.StartError = err.Error()
	if r.ExitCode == ExitClean || r.ExitCode == ExitHookFailed {
		r.ExitCode = ExitStartFailed
	}
}

func exitCode(r *Report) int {
	switch {
	case r.Forced:
		return ExitForced
	case r.DeadlineExceeded:
		return ExitDeadline
	case r.Err() != nil: // a hook that did not end OK
		return ExitHookFailed
	}
	return ExitClean
}

// logValue is the report as one JSON object in a log line: nested under a
// JSON handler, a quoted JSON string under a text handler.
func (r *Report) logValue() slog.Value {
	b, err := json.Marshal(r)
	if err != nil {
		return slog.StringValue("unmarshalable report: " + err.Error())
	}
	return slog.AnyValue(rawJSON(b))
}

// rawJSON is JSON that each slog handler prints in its own way.
type rawJSON []byte

func (j rawJSON) MarshalJSON() ([]byte, error) { return j, nil }
func (j rawJSON) MarshalText() ([]byte, error) { return j, nil }

// builtinHandler is log/slog's own default handler, read before any
// program's main can replace it with slog.SetDefault.
var builtinHandler = slog.Default().Handler()

// reportLogger is the logger for the report line: l, unless l writes
// through slog's built-in default handler. That handler prints text, so
// the report would be one escaped string, which neither jq nor a log
// pipeline reads as an object; the line then goes as JSON to the same
// output. A handler the program chose, text or not, is its choice.
func reportLogger(l *slog.Logger) *slog.Logger {
	if l.Handler() != builtinHandler {
		return l
	}
	return slog.New(slog.NewJSONHandler(log.Writer(), nil))
}
