package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drainkit/drainkit/internal/harness"
)

// verdict is what the drill found, as the table shows it and -json writes
// it.
type verdict struct {
	// Protocol is "http" or "grpc": the load's, and which causes FailedBy has.
	Protocol  string   `json:"protocol"`
	Command   []string `json:"command"`
	Instances int      `json:"instances"`
	Balancer  string   `json:"balancer"`
	Lag       duration `json:"lag_ms,omitempty"`
	Rate      int      `json:"rate"`

	Sent      int `json:"sent"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// FailedBy counts the failures by cause, every cause listed.
	FailedBy map[string]int `json:"failed_by_cause"`
	// Failed5xx counts the 5xx answers by status code.
	Failed5xx map[string]int `json:"failed_5xx_by_code,omitempty"`
	// FailedByCode counts the failed gRPC calls by status code.
	FailedByCode map[string]int `json:"failed_by_grpc_code,omitempty"`
	// Examples holds the first failure of each cause.
	Examples map[string]string `json:"failure_examples,omitempty"`
	// ClientRetries is 0 for HTTP: the load never retries. For gRPC it
	// counts grpc-go's transparent retries, which no option turns off.
	ClientRetries   int `json:"client_retries"`
	BalancerRetries int `json:"balancer_retries"`

	// LatencyDuring is of the succeeded requests pending at some moment of
	// the update, LatencyOutside of the others.
	LatencyDuring  latency   `json:"latency_during_update"`
	LatencyOutside latency   `json:"latency_outside_update"`
	Update         duration  `json:"update_ms"`
	Old            []stopped `json:"old_instances"`
	New            []started `json:"new_instances"`

	// Problems says why the drill failed; empty when it passed.
	Problems []string `json:"problems"`
	Pass     bool     `json:"pass"`
}

// started is a new instance, running at the end of the drill unless it
// crashed (then the problems say so), stopped by the drill after it.
type started struct {
	Name string `json:"name"`
	Pid  int    `json:"pid"`
}

// latency is the p50, p99 and max of N requests.
type latency struct {
	N   int      `json:"n"`
	P50 duration `json:"p50_ms"`
	P99 duration `json:"p99_ms"`
	Max duration `json:"max_ms"`
}

func latencyOf(p harness.Percentiles) latency {
	return latency{N: p.N, P50: duration(p.P50), P99: duration(p.P99), Max: duration(p.Max)}
}

// String is "p50 …, p99 …, max … (N requests)".
func (l latency) String() string {
	if l.N == 0 {
		return "n/a (no request)"
	}
	return fmt.Sprintf("p50 %s, p99 %s, max %s (%d requests)", l.P50, l.P99, l.Max, l.N)
}

// judge counts the outcomes and decides; the balancer's retries come
// from fe and the client's from c, both reported beside the failures.
func judge(cfg *drillConfig, fe frontend, c caller, insts []*instance, u *update, outs []outcome, s harness.Sent) *verdict {
	v := &verdict{
		Protocol: cfg.protocol(), Command: cfg.Command, Instances: cfg.Instances, Balancer: fe.name(), Lag: duration(cfg.Lag), Rate: cfg.Rate,
		FailedBy: map[string]int{}, Failed5xx: map[string]int{}, FailedByCode: map[string]int{}, Examples: map[string]string{},
		BalancerRetries: fe.retries(), ClientRetries: c.retries(), Update: duration(u.end.Sub(u.start)), Old: u.old,
	}
	for _, cause := range v.causes() {
		v.FailedBy[cause] = 0
	}
	var during, outside []time.Duration
	warmedUp := false // a request before the update succeeded
	for _, o := range outs {
		v.Sent++
		if o.cause != "" {
			v.Failed++
			v.FailedBy[o.cause]++
			if o.cause == cause5xx {
				v.Failed5xx[fmt.Sprint(o.status)]++
			}
			if o.code != "" {
				v.FailedByCode[o.code]++
			}
			if _, ok := v.Examples[o.cause]; !ok {
				v.Examples[o.cause] = o.err
			}
			continue
		}
		v.Succeeded++
		warmedUp = warmedUp || o.sent.Before(u.start)
		if !o.answered.Before(u.start) && !o.sent.After(u.end) {
			during = append(during, o.answered.Sub(o.sent))
		} else {
			outside = append(outside, o.answered.Sub(o.sent))
		}
	}
	v.LatencyDuring, v.LatencyOutside = latencyOf(harness.PercentilesOf(during)), latencyOf(harness.PercentilesOf(outside))

	if !warmedUp {
		first := "none"
		for _, o := range outs {
			if o.cause != "" {
				first = o.err
				break
			}
		}
		flags := "-path and -method"
		if v.Protocol == "grpc" {
			flags = "-call and -request"
		}
		v.Problems = append(v.Problems, fmt.Sprintf("no request succeeded before the update began (first failure: %s): are %s right?", first, flags))
	}
	if v.Failed > 0 {
		v.Problems = append(v.Problems, fmt.Sprintf("%d of %d %s failed", v.Failed, v.Sent, v.unit()))
	}
	for _, o := range u.old {
		switch {
		case o.Early:
			v.Problems = append(v.Problems, fmt.Sprintf("%s exited (%s) before its SIGTERM", o.Name, o.Exit))
		case o.Killed:
			v.Problems = append(v.Problems, fmt.Sprintf("%s did not exit within -grace %s and was SIGKILLed", o.Name, cfg.Grace))
		case o.ExitCode != 0:
			v.Problems = append(v.Problems, fmt.Sprintf("%s exited after its SIGTERM with %s", o.Name, o.Exit))
		}
	}
	for _, in := range insts[cfg.Instances:] {
		v.New = append(v.New, started{Name: in.name, Pid: in.proc.Pid()})
		if !in.running() {
			v.Problems = append(v.Problems, fmt.Sprintf("new instance %s exited during the drill (%s)", in.name, in.proc.ExitState()))
		}
	}
	if s.N == 0 || s.Last.Before(u.end) {
		v.Problems = append(v.Problems, "the load stopped before the update ended (-duration too short): the end of the update went unmeasured")
	}
	v.Pass = len(v.Problems) == 0
	if v.Problems == nil {
		v.Problems = []string{}
	}
	return v
}

// table renders the verdict for a person.
func (v *verdict) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "drainkit drill: %s\n\n", v.title())
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k string, f string, args ...any) { fmt.Fprintf(w, "%s\t%s\n", k, fmt.Sprintf(f, args...)) }
	row(v.unit()+" sent", "%d", v.Sent)
	row("succeeded", "%d", v.Succeeded)
	var by []string
	for _, c := range v.causes() {
		by = append(by, fmt.Sprintf("%s %d", words(c), v.FailedBy[c]))
	}
	row("failed", "%d (%s)", v.Failed, strings.Join(by, ", "))
	if len(v.Failed5xx) > 0 {
		var codes []string
		for _, c := range slices.Sorted(maps.Keys(v.Failed5xx)) {
			codes = append(codes, fmt.Sprintf("%s: %d", c, v.Failed5xx[c]))
		}
		row("  5xx by code", "%s", strings.Join(codes, ", "))
	}
	if len(v.FailedByCode) > 0 {
		var codes []string
		for _, c := range slices.Sorted(maps.Keys(v.FailedByCode)) {
			codes = append(codes, fmt.Sprintf("%s: %d", c, v.FailedByCode[c]))
		}
		row("  by gRPC code", "%s", strings.Join(codes, ", "))
	}
	for _, c := range v.causes() {
		if e, ok := v.Examples[c]; ok {
			row("  first "+words(c), "%s", e)
		}
	}
	if v.Protocol == "grpc" {
		row("client retries", "%d (grpc-go's transparent retries of calls no server processed; nothing else retries)", v.ClientRetries)
	} else {
		row("client retries", "0 (the load never retries)")
	}
	switch v.Balancer {
	case "kube":
		row("balancer retries", "0 (kube-proxy does not retry)")
	case "roundrobin":
		row("balancer retries", "0 (the client's balancer; its retries are the client's)")
	default:
		row("balancer retries", "%d (connection failures only; a 5xx is never retried)", v.BalancerRetries)
	}
	row("latency during the update", "%s", v.LatencyDuring)
	row("latency outside it", "%s", v.LatencyOutside)
	row("update", "%s replaced in %s", plural(len(v.Old), "instance"), v.Update)
	for _, o := range v.Old {
		row("old "+o.Name, "%s", o.summary())
		if o.Report != nil {
			for _, line := range o.Report.hookLines() {
				row("", "  %s", line)
			}
		}
	}
	w.Flush()
	if v.Pass {
		fmt.Fprintf(&b, "\n%s\n", v.passed())
	} else {
		b.WriteString("\nFAIL:\n")
		for _, p := range v.Problems {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
	}
	return b.String()
}

// passed is the line that says the drill passed.
// A pass the balancer's retries made says so: a balancer that retries
// on the service's behalf must not make a failure look like a success.
func (v *verdict) passed() string {
	line := fmt.Sprintf("PASS: no %s failed, every old instance exited 0 in time", strings.TrimSuffix(v.unit(), "s"))
	switch {
	case v.BalancerRetries > 0:
		return fmt.Sprintf("%s, but only because the balancer retried %d refused connections: behind one that retries nothing (kube-proxy: -lb kube) they fail.",
			line, v.BalancerRetries)
	case v.Protocol == "grpc" && v.ClientRetries > 0:
		return fmt.Sprintf("%s, with %d transparent retries by grpc-go of calls no server processed (every grpc-go client makes them; others may not).",
			line, v.ClientRetries)
	}
	return line + "."
}

// unit is what the load sends: "requests" or "calls".
func (v *verdict) unit() string {
	if v.Protocol == "grpc" {
		return "calls"
	}
	return "requests"
}

// causes are the failure causes of the verdict's protocol, in order.
func (v *verdict) causes() []string {
	if v.Protocol == "grpc" {
		return grpcCauses
	}
	return httpCauses
}

// title says what was drilled: "3 instances of svc behind haproxy, 50 requests/s".
func (v *verdict) title() string {
	lb := v.Balancer
	if v.Balancer == "kube" {
		lb = fmt.Sprintf("kube (endpoints removed %s after SIGTERM)", v.Lag)
	}
	if v.Balancer == "roundrobin" {
		lb = fmt.Sprintf("grpc-go's health-checked round_robin (addresses removed %s after SIGTERM)", v.Lag)
	}
	unit := v.unit()
	if v.Protocol == "grpc" {
		unit = "gRPC " + unit
	}
	return fmt.Sprintf("%s of %s behind %s, %d %s/s", plural(v.Instances, "instance"), filepath.Base(v.Command[0]), lb, v.Rate, unit)
}

// summary is one line on how an old instance ended.
func (s stopped) summary() string {
	if s.Early {
		return s.Exit + " before its SIGTERM"
	}
	out := fmt.Sprintf("%s, %s after SIGTERM", strings.TrimPrefix(s.Exit, "exit status "), s.TimeToExit)
	if strings.HasPrefix(s.Exit, "exit status ") {
		out = "exit " + out
	}
	if s.Killed {
		out += " (SIGKILLed at -grace)"
	}
	if s.Report == nil {
		return out + "; no drain report"
	}
	r := s.Report
	out += fmt.Sprintf("; drain report: %s, exit_code %d", ms(r.Duration), r.ExitCode)
	if r.DeadlineExceeded {
		out += ", deadline exceeded"
	}
	if r.Forced {
		out += ", forced"
	}
	switch a := r.Arrivals; {
	case a == nil:
	case a.AfterFlip == 0:
		out += "; nothing arrived after the flip"
	default:
		out += fmt.Sprintf("; after the flip %d arrived, the last %s after it, %d refused after intake",
			a.AfterFlip, ms(a.LastAfterFlipMS), a.RefusedAfterIntake)
	}
	return out
}

// words writes a cause as the table shows it.
func words(cause string) string { return strings.ReplaceAll(cause, "_", " ") }

// plural is "1 instance", "3 instances".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// hookLines are the report's hooks, one a line, in columns.
func (r *drainReport) hookLines() []string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, h := range r.Hooks {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s", h.Phase, h.Name, h.Outcome, ms(h.Duration))
		if h.Error != "" {
			fmt.Fprintf(w, "\t%s", h.Error)
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}
