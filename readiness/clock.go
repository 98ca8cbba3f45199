package readiness

import (
	"sync/atomic"
	"time"
)

// The registry's clock ticks every clockTick; a tick that comes later than
// clockMaxStep after the one before adds clockMaxStep, no more.
const (
	clockTick    = 100 * time.Millisecond
	clockMaxStep = 2 * clockTick
)

// runClock measures the time the process was seen running, by which
// heartbeats are judged. Its goroutine adds the time since its last tick,
// capped at clockMaxStep: a tick that comes late means the whole process,
// this goroutine with it, did not run, and that time is no loop's fault.
// Confirming staleness over two probes was the alternative; it needs no
// goroutine, but doubles the time to detect a stuck loop and still counts a
// pause that falls between the two probes.
type runClock struct {
	epoch   time.Time                    // set by New, before any reading
	reading atomic.Pointer[clockReading] // nil until start: running time is wall time
}

// clockReading is the clock at its last tick, both times since epoch.
type clockReading struct{ wall, running time.Duration }

// clockTicking runs in the clock's goroutine before each tick; tests block
// it to stand in for a process that is not running.
var clockTicking = func() {}

// now is the running time since epoch.
func (c *runClock) now() time.Duration {
	r := c.reading.Load() // before the wall clock, so wall ≥ r.wall: never backwards
	wall := time.Since(c.epoch)
	if r == nil {
		return wall
	}
	return r.running + min(wall-r.wall, clockMaxStep)
}

// started reports whether start was called.
func (c *runClock) started() bool { return c.reading.Load() != nil }

// start makes the running time so far equal to the wall time so far.
func (c *runClock) start() {
	wall := time.Since(c.epoch)
	c.reading.Store(&clockReading{wall: wall, running: wall})
}

// run ticks until done is closed or liveness is no longer enforced: once
// a process drains, no heartbeat fails it.
func (c *runClock) run(done <-chan struct{}, enforced func() bool) {
	t := time.NewTicker(clockTick)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		clockTicking()
		r := c.reading.Load()
		wall := time.Since(c.epoch)
		c.reading.Store(&clockReading{wall: wall, running: r.running + min(wall-r.wall, clockMaxStep)})
		if !enforced() {
			return
		}
	}
}
