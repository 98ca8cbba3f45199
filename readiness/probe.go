package readiness

import (
	"context"
	"time"

	"github.com/drainkit/drainkit/lifecycle"
)

// Ready answers a ready probe. It reads the lifecycle state first: a process
// that is not Running, or whose registry is closed, is not ready, whatever
// its checks said a moment ago, and no check runs. Otherwise it answers from
// results no older than CacheTTL, waiting only for the first ones and for the
// first after a quiet spell; ctx bounds only this caller's wait.
func (r *Registry) Ready(ctx context.Context) Report { return r.ready(ctx, true) }

// ready is Ready; with all false, Checks holds only the failing checks:
// what a probe's body lists without ?verbose, and all that the
// transition log reads, so a healthy probe builds no list at all.
func (r *Registry) ready(ctx context.Context, all bool) Report {
	if r.notNew() {
		return notNewReport()
	}
	if rep, ok := r.stateReport(); ok {
		return rep
	}
	ev, err := r.results(ctx)
	if err == nil {
		r.answeredFrom(ev)
	}
	// The flip may have happened while this probe waited for a refresh.
	if rep, ok := r.stateReport(); ok {
		return rep
	}
	now := time.Now()
	rep := Report{State: lifecycle.Running, Service: r.cfg.Service, NodeID: r.cfg.NodeID, Time: now}
	if err != nil {
		// Only this caller's wait ended (the prober gave up before the
		// first results, or the first after a quiet spell, landed): it
		// gets a failure, but nothing was learned about the process, so
		// no transition is logged or counted.
		rep.Status, rep.Reason = StatusFail, shortMessage(err)
		return rep
	}
	rep.Status = StatusOK
	if all {
		rep.Checks = make([]CheckResult, 0, len(ev.results))
	}
	for _, res := range ev.results {
		if res.err == nil && !all {
			continue
		}
		c := CheckResult{Name: res.name, Tier: res.tier.String(), Status: StatusOK,
			Duration: res.duration, Age: now.Sub(res.at)}
		if res.err != nil {
			c.Status, c.Message = StatusFail, res.err.Error()
			switch {
			case res.tier == Gating:
				rep.Status = StatusFail
			case rep.Status == StatusOK:
				rep.Status = StatusDegraded
			}
		}
		rep.Checks = append(rep.Checks, c)
	}
	r.readyTransition(&rep, lifecycle.Running, ev.duration, ev)
	return rep
}

// stateReport answers for any state but Running, and once the registry is
// closed, without running a check.
func (r *Registry) stateReport() (Report, bool) {
	st := r.state()
	if st == lifecycle.Running && !r.closed.Load() {
		return Report{}, false
	}
	if r.closed.Load() { // closed while the process still starts, runs or drains
		st = lifecycle.Stopped
	}
	rep := Report{Status: StatusFail, Reason: st.String(), State: st,
		Service: r.cfg.Service, NodeID: r.cfg.NodeID, Time: time.Now()}
	r.readyTransition(&rep, st, 0, nil)
	return rep, true
}

// live answers a liveness probe from the heartbeats alone: no dependency is
// ever checked, since a restart cannot fix one and restarting every replica
// during its outage is a restart storm. Heartbeats fail it only while
// Running: loops start with the app and stop on purpose in the drain. Once
// the drain stops the clock, ages no longer grow.
func (r *Registry) live() Report {
	if r.notNew() {
		return notNewReport()
	}
	st := r.state()
	enforced := enforcedIn(st)
	rep := Report{Status: StatusOK, State: st, Service: r.cfg.Service, NodeID: r.cfg.NodeID, Time: time.Now()}
	r.mu.Lock()
	if enforced {
		r.watchClockLocked()
	}
	hbs := append([]*heartbeat(nil), r.heartbeats...)
	r.mu.Unlock()
	rep.Checks = make([]CheckResult, len(hbs))
	for i, h := range hbs {
		age := h.age()
		c := CheckResult{Name: h.name, Tier: tierLiveness, Status: StatusOK, Age: age}
		if age > h.maxGap {
			c.Status = StatusFail
			c.Message = "no heartbeat for " + age.Round(time.Millisecond).String() + " (max " + h.maxGap.String() + ")"
			if enforced {
				rep.Status = StatusFail
			} else if rep.Status == StatusOK {
				rep.Status, rep.Reason = StatusDegraded, st.String()
			}
		}
		rep.Checks[i] = c
	}
	r.liveTransition(&rep, st)
	return rep
}

// notNewReport is every probe's answer from a zero Registry.
func notNewReport() Report {
	return Report{Status: StatusFail, Reason: errNotNew.Error(), Time: time.Now()}
}

// enforcedIn reports whether a stale heartbeat fails liveness in state st.
// Not while Starting: the loops start with the app's last start hooks, and
// a start that waits on a dependency is not a stuck loop.
func enforcedIn(st lifecycle.State) bool { return st == lifecycle.Running }

// enforced reports whether a stale heartbeat fails liveness now.
func (r *Registry) enforced() bool { return enforcedIn(r.state()) }
