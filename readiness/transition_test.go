package readiness

import (
	"testing"
	"time"
)

// A state's answer (the flip's "fail", admit nil) comes after a probe's
// change whose admit read the state before the flip wrote it and that is
// being recorded: the flip read the last status without the lock, saw the
// "fail" the probe's "ok" was replacing, and recorded nothing, so "ok"
// stood after the flip (a clean-clone CI run of
// TestAProbeRacingTheFlipNeverRecordsReadyAfterIt).
func TestTheFlipsAnswerComesAfterAChangeAdmittedBeforeIt(t *testing.T) {
	var tr transitions
	var told []string
	tell := func(status string) func(old string) {
		return func(old string) { told = append(told, old+"→"+status) }
	}
	tr.change(answer{status: StatusFail, evaluation: true}, func() bool { return true }, tell(StatusFail))

	flipped := make(chan struct{})
	admit := func() bool { // the probe reads the state: Running, and the flip begins
		go func() {
			defer close(flipped)
			tr.change(answer{status: StatusFail}, nil, tell(StatusFail))
		}()
		// The flip either returns at once (it saw no change) or waits for
		// this change's lock: it cannot record before this change does.
		wait := time.NewTimer(50 * time.Millisecond)
		defer wait.Stop()
		select {
		case <-flipped:
		case <-wait.C:
		}
		return true
	}
	tr.change(answer{status: StatusOK, evaluation: true}, admit, tell(StatusOK))
	<-flipped
	if got := tr.last.Load().status; got != StatusFail {
		t.Errorf("last status %q after the flip, lines %q; want %q", got, told, StatusFail)
	}
}
