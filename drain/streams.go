package drain

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for [StreamsConfig].
const (
	// DefaultMaxCloseRate is how many streams per second a node closes at
	// most while pacing: the reconnects it sends to the other nodes.
	DefaultMaxCloseRate = 200
	// DefaultCloseMargin is the part of the drain budget kept free after the
	// last paced close, for handlers to say goodbye and return and for the
	// phases after WaitInFlight (flush, release, close).
	DefaultCloseMargin = 2 * time.Second
)

// StreamsConfig configures [Streams]. Zero values mean their defaults.
type StreamsConfig struct {
	// Name identifies the streams in hook names, reports and the "streams"
	// metric label, e.g. "sse" or "grpc".
	Name string
	// MaxCloseRate caps the paced closes per second; default
	// [DefaultMaxCloseRate].
	MaxCloseRate float64
	// Margin is kept free between the last paced close and the drain
	// deadline; default [DefaultCloseMargin]. When less than twice Margin is
	// left as pacing begins, half of what is left is kept instead.
	Margin time.Duration
	// Registerer receives the drain_streams_* metrics; nil registers nothing
	// (the metrics are still kept).
	Registerer prometheus.Registerer
}

// minCloseRate is below every MaxCloseRate: one close per longest
// time.Duration (292 years).
const minCloseRate = float64(time.Second) / math.MaxInt64

// validate reports the first field with a bad value.
func (c StreamsConfig) validate() error {
	switch {
	case c.Name == "":
		return errors.New(`drain: StreamsConfig.Name is empty; want a name such as "sse"`)
	case c.MaxCloseRate < 0 || math.IsNaN(c.MaxCloseRate) || math.IsInf(c.MaxCloseRate, 0):
		return fmt.Errorf("drain: StreamsConfig.MaxCloseRate is %v; want a positive rate per second or zero for the default", c.MaxCloseRate)
	case c.MaxCloseRate > 0 && !(float64(time.Second)/c.MaxCloseRate < math.MaxInt64):
		// Its interval between closes would overflow a time.Duration.
		return fmt.Errorf("drain: StreamsConfig.MaxCloseRate is %v; want more than %.2g per second, or zero for the default", c.MaxCloseRate, minCloseRate)
	case c.Margin < 0:
		return fmt.Errorf("drain: StreamsConfig.Margin is %v; want a positive duration or zero for the default", c.Margin)
	}
	return nil
}

func (c StreamsConfig) withDefaults() StreamsConfig {
	if c.MaxCloseRate == 0 {
		c.MaxCloseRate = DefaultMaxCloseRate
	}
	if c.Margin == 0 {
		c.Margin = DefaultCloseMargin
	}
	return c
}

// Streams drains long-lived streams (Server-Sent Events, WebSockets and
// other hijacked connections, gRPC server streams), which would otherwise
// hold a drain to its deadline and then all drop at once. A handler
// registers its stream with [Streams.Open]. The hooks of [Streams.Hooks]
// tell every stream at StopIntake ([Streams.Told]), then close them one by
// one (cancel the context Open returned) while the phases up to Release go
// on, close what is left once only Margin remains, and wait for the
// handlers until the deadline. A handler closes what its context guards;
// Streams closes no connection. docs/streams.md has the pacing.
type Streams struct {
	cfg StreamsConfig
	met *streamMetrics

	mu      sync.Mutex
	open    []*stream     // not yet closed by the drain; each knows its index
	closing int           // closed by the drain, not yet ended
	told    chan struct{} // closed at StopIntake
	isTold  bool
	empty   chan struct{} // closed once told and nothing is open or closing
	rep     StreamReport

	startOnce  sync.Once
	pacingDone chan struct{} // closed when the pacing goroutine has returned
	stopMu     sync.Mutex
	stopPacing context.CancelFunc // nil until the pacing starts
}

// NewStreams returns Streams for cfg, or cfg's validation error. It
// registers the metrics with cfg.Registerer and starts nothing.
func NewStreams(cfg StreamsConfig) (*Streams, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	met, err := newStreamMetrics(cfg.Name, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Streams{cfg: cfg, met: met, told: make(chan struct{}), empty: make(chan struct{}), pacingDone: make(chan struct{})}, nil
}

// stream is one long-lived stream registered with [Streams.Open].
type stream struct {
	s      *Streams
	cancel context.CancelFunc
	idx    int  // index in s.open; -1 once closed by the drain (guarded by s.mu)
	ended  bool // end was called (guarded by s.mu)
}

// Open registers a stream and returns its context and the function that
// ends it, as context.WithCancel does. The context is ctx's, also cancelled
// when the drain closes the stream; the handler should then say goodbye
// and return. Defer end right after Open; it is idempotent. Once the drain
// has begun, Open registers nothing and returns ctx, an end that does
// nothing and ok false: refuse the stream (503 with Retry-After, gRPC
// UNAVAILABLE) so that the client connects elsewhere.
func (s *Streams) Open(ctx context.Context) (sctx context.Context, end func(), ok bool) {
	sctx, cancel := context.WithCancel(ctx)
	st := &stream{s: s, cancel: cancel}
	s.mu.Lock()
	if s.isTold {
		s.rep.Refused++
		s.mu.Unlock()
		cancel()
		s.met.refused.Inc()
		return ctx, noEnd, false
	}
	st.idx = len(s.open)
	s.open = append(s.open, st)
	s.mu.Unlock()
	s.met.open.Inc()
	return sctx, st.end, true
}

// noEnd is the end of a refused stream.
func noEnd() {}

// Told returns a channel closed when the drain begins (StopIntake): every
// open stream will be closed before the drain deadline, and may say so to
// its client now (an SSE retry: field, a gRPC message) or end itself.
func (s *Streams) Told() <-chan struct{} { return s.told }

// end unregisters the stream; idempotent.
func (st *stream) end() {
	s := st.s
	s.mu.Lock()
	if st.ended {
		s.mu.Unlock()
		return
	}
	st.ended = true
	endedBeforeClose := st.idx >= 0
	if endedBeforeClose {
		s.remove(st)
		if s.isTold {
			s.rep.Ended++
		}
	} else {
		s.closing--
	}
	s.checkEmpty()
	told := s.isTold
	s.mu.Unlock()
	st.cancel()
	s.met.open.Dec()
	if endedBeforeClose && told {
		s.met.closed.WithLabelValues(reasonEnded).Inc()
	}
}

// remove takes st out of s.open in O(1). s.mu must be held.
func (s *Streams) remove(st *stream) {
	last := len(s.open) - 1
	moved := s.open[last]
	s.open[st.idx], moved.idx = moved, st.idx
	s.open[last] = nil
	s.open = s.open[:last]
	st.idx = -1
}

// checkEmpty closes s.empty once the drain has begun and no stream is open
// or closing. s.mu must be held.
func (s *Streams) checkEmpty() {
	if s.isTold && len(s.open) == 0 && s.closing == 0 {
		select {
		case <-s.empty:
		default:
			close(s.empty)
		}
	}
}

// tell closes intake and tells every stream; idempotent.
func (s *Streams) tell() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isTold {
		return
	}
	s.isTold = true
	s.rep.Told = len(s.open)
	close(s.told)
	s.checkEmpty()
}

// Reasons a stream ended during a drain, as the drain_streams_closed_total
// label says them.
const (
	reasonEnded = "ended" // ended by its handler or client before its turn
	reasonPaced = "paced" // closed by the drain at its paced turn
	reasonHard  = "hard"  // closed by the drain at once, with the others left
)

// closeNext closes one open stream for reason, if there is one.
func (s *Streams) closeNext(reason string) bool {
	s.mu.Lock()
	n := len(s.open)
	if n == 0 {
		s.mu.Unlock()
		return false
	}
	st := s.open[n-1]
	s.remove(st)
	s.closing++
	s.count(reason, 1)
	s.mu.Unlock()
	st.cancel()
	s.met.closed.WithLabelValues(reason).Inc()
	return true
}

// closeAll closes every open stream at once; it does not block.
func (s *Streams) closeAll() {
	s.tell()
	s.mu.Lock()
	open := s.open
	s.open = nil
	for _, st := range open {
		st.idx = -1
	}
	s.closing += len(open)
	s.count(reasonHard, len(open))
	s.mu.Unlock()
	for _, st := range open {
		st.cancel()
	}
	if len(open) > 0 {
		s.met.closed.WithLabelValues(reasonHard).Add(float64(len(open)))
	}
}

// count records n closes for reason in the report. s.mu must be held.
func (s *Streams) count(reason string, n int) {
	if reason == reasonPaced {
		s.rep.Paced += n
	} else {
		s.rep.Hard += n
	}
}

// snapshot counts what is open and closing. It returns the report so far,
// with Unended set to the streams closed whose handlers have not returned.
func (s *Streams) snapshot() (open int, rep StreamReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep = s.rep
	rep.Unended = s.closing
	return len(s.open), rep
}
