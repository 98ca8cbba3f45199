package drain

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainkit/drainkit/internal/metricreg"
)

// closeJitter spreads each interval between paced closes uniformly over
// [1−closeJitter, 1+closeJitter] times the paced interval, so that nodes
// draining at once, or clients told at once, do not fall into step.
const closeJitter = 0.5

// maxCatchUp is how far behind its schedule pacing may fall and still
// close at once what fell due: a late timer or a process stopped at its
// CPU limit is made good (TestStreamsPaceKeepsUpWhenThrottled), a longer
// stall is not, so a catch-up closes at most MaxCloseRate × maxCatchUp.
const maxCatchUp = 100 * time.Millisecond

// StreamReport says what a drain did with the streams of one [Streams]; it
// is in the report of its close hook ([HookResult.Streams]).
type StreamReport struct {
	// Told is how many streams were open when the drain began.
	Told int `json:"told"`
	// Ended is how many ended on their own (handler or client) before
	// their turn, Paced how many the drain closed at their paced turn and
	// Hard how many it closed at once, when only the margin was left or
	// the drain was cut short.
	Ended int `json:"ended"`
	Paced int `json:"paced"`
	Hard  int `json:"hard"`
	// Unended is how many were closed but had not ended (their handlers
	// had not returned) when the hook returned.
	Unended int `json:"unended"`
	// Refused is how many Open calls were refused because the drain had begun.
	Refused int `json:"refused"`
	// PeakRate is the highest close rate per second the pacing used.
	PeakRate float64 `json:"peak_rate"`
}

// Hooks returns the hooks that drain the streams: name+".stop_intake"
// (StopIntake) tells every stream, refuses new ones and starts the pacing
// in the background; name+".close" (Release) waits for the pacing and for
// every stream to end until its deadline, fails if closed streams have not
// ended by then, and carries the [StreamReport]. Both Abort by closing
// every stream at once.
func (s *Streams) Hooks() []Hook {
	name := s.cfg.Name
	return []Hook{
		{Name: name + ".stop_intake", Phase: StopIntake, Abort: s.abort,
			Run: func(ctx context.Context) error { s.start(ctx); return nil }},
		{Name: name + ".close", Phase: Release, Abort: s.abort, Run: s.wait,
			streams: func() *StreamReport { _, r := s.snapshot(); return &r }},
	}
}

// start tells every stream and starts the pacing, once. The pacing keeps
// ctx's deadline but not its cancellation: it outlives the hook that
// started it, and Abort stops it.
func (s *Streams) start(ctx context.Context) {
	s.tell()
	s.startOnce.Do(func() {
		base := context.WithoutCancel(ctx)
		var (
			pctx context.Context
			stop context.CancelFunc
		)
		if d, ok := ctx.Deadline(); ok {
			pctx, stop = context.WithDeadline(base, d)
		} else {
			pctx, stop = context.WithCancel(base)
		}
		s.stopMu.Lock()
		s.stopPacing = stop
		s.stopMu.Unlock()
		go func() {
			defer close(s.pacingDone)
			defer stop()
			s.pace(pctx)
		}()
	})
}

// abort closes every stream at once and stops the pacing; it does not block.
func (s *Streams) abort() {
	s.closeAll()
	s.stopMu.Lock()
	stop := s.stopPacing
	s.stopMu.Unlock()
	if stop != nil {
		stop()
	}
}

// wait waits for the pacing and then for every stream to end, while ctx
// lives; at ctx's end it closes what is left and returns.
func (s *Streams) wait(ctx context.Context) error {
	s.start(ctx) // in case StopIntake was skipped or failed
	select {
	case <-s.pacingDone:
	case <-ctx.Done():
		s.abort()
		return s.unended(ctx)
	}
	select {
	case <-s.empty:
		return nil
	case <-ctx.Done():
		return s.unended(ctx)
	}
}

// pace closes the open streams one by one until the margin before ctx's
// deadline, then the rest at once; it returns early when every stream has
// ended, or at ctx's end (closing the rest). Each close is due from the
// previous one's due time, not from when the timer fired, so a late
// wake-up does not lower the rate: it closes what fell due meanwhile, up
// to [maxCatchUp] of the schedule.
func (s *Streams) pace(ctx context.Context) {
	defer s.met.rate.Set(0)
	end, hasEnd := s.pacingEnd(ctx)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	due := time.Now()
	for {
		open, _ := s.snapshot()
		if open == 0 {
			return
		}
		if floor := time.Now().Add(-maxCatchUp); due.Before(floor) {
			due = floor
		}
		at, paced := s.nextClose(open, due, end, hasEnd)
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				s.closeAll()
				return
			case <-s.empty: // the rest ended on their own
				return
			case <-timer.C:
			}
		}
		if !paced {
			s.closeAll()
			return
		}
		s.closeNext(reasonPaced)
		due = at
	}
}

// pacingEnd returns when pacing must be over: ctx's deadline less the
// margin (less half of what is left when that is under twice the margin).
func (s *Streams) pacingEnd(ctx context.Context) (time.Time, bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return time.Time{}, false
	}
	margin := s.cfg.Margin
	if left := time.Until(deadline); left < 2*margin {
		margin = left / 2
	}
	return deadline.Add(-margin), true
}

// nextClose returns when the next close of one of open streams is due, the
// previous one having been due at prev, and whether it is paced. It is not
// when the capped rate cannot fit them in the window: the rest then close
// at once at its end. Uncapped, a jitter past the end lands on the end.
func (s *Streams) nextClose(open int, prev, end time.Time, hasEnd bool) (time.Time, bool) {
	maxRate := s.cfg.MaxCloseRate
	rate := maxRate
	if hasEnd {
		left := end.Sub(prev)
		if left <= 0 {
			return end, false
		}
		rate = min(float64(open)/left.Seconds(), maxRate)
	}
	s.setRate(rate)
	interval := time.Duration(float64(time.Second) / rate)
	d := time.Duration(float64(interval) * (1 - closeJitter + 2*closeJitter*rand.Float64()))
	at := prev.Add(max(d, time.Duration(float64(time.Second)/maxRate)))
	if hasEnd && !at.Before(end) {
		return end, rate < maxRate
	}
	return at, true
}

func (s *Streams) setRate(rate float64) {
	s.mu.Lock()
	s.rep.PeakRate = max(s.rep.PeakRate, rate)
	s.mu.Unlock()
	s.met.rate.Set(rate)
}

// unended reports the streams closed whose handlers ignore their context.
func (s *Streams) unended(ctx context.Context) error {
	_, rep := s.snapshot()
	if rep.Unended == 0 {
		return nil
	}
	return fmt.Errorf("drain: streams %q: %d closed streams had not ended: %w", s.cfg.Name, rep.Unended, ctx.Err())
}

// streamMetrics are the drain_streams_* metrics of one Streams, labelled
// streams=<name> so that several can share a registry.
type streamMetrics struct {
	open    prometheus.Gauge
	rate    prometheus.Gauge
	closed  *prometheus.CounterVec
	refused prometheus.Counter
}

func newStreamMetrics(name string, reg prometheus.Registerer) (*streamMetrics, error) {
	labels := prometheus.Labels{"streams": name}
	m := &streamMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "drain_streams_open", ConstLabels: labels,
			Help: "Long-lived streams registered and not yet ended.",
		}),
		rate: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "drain_streams_close_rate", ConstLabels: labels,
			Help: "Paced close rate per second while a drain closes streams, else 0.",
		}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drain_streams_closed_total", ConstLabels: labels,
			Help: "Streams ended during a drain, by reason (ended: by handler or client before their turn, paced, hard).",
		}, []string{"reason"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drain_streams_refused_total", ConstLabels: labels,
			Help: "Streams refused because the drain had begun.",
		}),
	}
	for _, r := range []string{reasonEnded, reasonPaced, reasonHard} {
		m.closed.WithLabelValues(r) // so that a dashboard sees zeros before the first drain
	}
	err := metricreg.Register(reg, fmt.Sprintf("drain: streams %q: StreamsConfig.Registerer", name),
		metricreg.Named{Name: "drain_streams_open", Collector: m.open},
		metricreg.Named{Name: "drain_streams_close_rate", Collector: m.rate},
		metricreg.Named{Name: "drain_streams_closed_total", Collector: m.closed},
		metricreg.Named{Name: "drain_streams_refused_total", Collector: m.refused})
	if err != nil {
		return nil, err
	}
	return m, nil
}
