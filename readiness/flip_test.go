package readiness_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// The flip is logged when it happens, not at the next probe, and exactly once.
func TestOnTransitionLogsTheFlip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newState(lifecycle.Running)
		l := &logs{}
		r := newRegistry(t, st, l)
		mustAdd(t, r, readiness.Check{Name: "db", Probe: (&counter{}).probe})
		r.Ready(t.Context())

		st.set(lifecycle.Draining)
		r.OnTransition(lifecycle.Transition{From: lifecycle.Running, To: lifecycle.Draining})
		recs := l.records(t)
		if len(recs) != 2 {
			t.Fatalf("got %d log lines; want 2 (unknown→ok, ok→fail at the flip): %v", len(recs), recs)
		}
		if got := recs[1]["new_status"]; got != "fail" {
			t.Errorf("flip line new_status = %v; want fail", got)
		}
		if got := recs[1]["reason"]; got != "draining" {
			t.Errorf("flip line reason = %v; want draining", got)
		}
		r.Ready(t.Context()) // the next probe sees the same status: no new line
		if n := len(l.records(t)); n != 2 {
			t.Errorf("got %d log lines after a probe; want still 2", n)
		}
	})
}

func TestHeartbeatFresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(t, newState(lifecycle.Running), &logs{})
		h, err := r.Heartbeat("outbox_worker", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Fresh() {
			t.Error("new heartbeat: Fresh() = false; want true")
		}
		time.Sleep(2 * time.Second) // fake time: the loop has been silent
		if h.Fresh() {
			t.Error("silent for 2s with a 1s gap: Fresh() = true; want false")
		}
		h.Beat()
		if !h.Fresh() {
			t.Error("after Beat: Fresh() = false; want true")
		}
	})
}
