package drain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/internal/configerr"
)

// handlers are the goroutines of open streams: each waits for its stream's
// context, notes when it ended, and calls End. ignore makes them hold on
// after their context ends until release is closed, as a handler that
// ignores its context would.
type handlers struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  []time.Time
	release chan struct{}
}

func openHandlers(t *testing.T, s *drain.Streams, n int, ignore bool) *handlers {
	t.Helper()
	h := &handlers{release: make(chan struct{})}
	if !ignore {
		close(h.release)
	}
	for range n {
		ctx, end, ok := s.Open(context.Background())
		require.True(t, ok, "Open before the drain")
		h.wg.Go(func() {
			<-ctx.Done()
			h.mu.Lock()
			h.closed = append(h.closed, time.Now())
			h.mu.Unlock()
			<-h.release
			end()
		})
	}
	return h
}

// times returns when each stream's context ended, in order.
func (h *handlers) times() []time.Time {
	h.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.SortedFunc(slices.Values(h.closed), time.Time.Compare)
}

func newStreams(t *testing.T, cfg drain.StreamsConfig) *drain.Streams {
	t.Helper()
	s, err := drain.NewStreams(cfg)
	require.NoError(t, err)
	return s
}

// drainStreams runs s's hooks under a deadline budget from now.
func drainStreams(s *drain.Streams, budget time.Duration) (*drain.Report, drain.StreamReport) {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	r := drain.Run(ctx, "test", s.Hooks())
	h, _ := r.Hook(s.Hooks()[1].Name)
	if h.Streams == nil {
		return r, drain.StreamReport{}
	}
	return r, *h.Streams
}

func TestStreamsPacedOverTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100
		s := newStreams(t, drain.StreamsConfig{Name: "sse", MaxCloseRate: 1000, Margin: 2 * time.Second})
		h := openHandlers(t, s, n, false)
		start := time.Now()
		end := start.Add(8 * time.Second) // 10 s budget less the 2 s margin
		r, got := drainStreams(s, 10*time.Second)
		require.NoError(t, r.Err())
		assert.Equal(t, drain.StreamReport{Told: n, Paced: n, PeakRate: got.PeakRate}, got)

		// Each close waits the paced interval (time left ÷ streams left),
		// jittered by ±50%, or lands on the window's end when the jitter
		// would carry it past it.
		closes := h.times()
		require.Len(t, closes, n)
		prev := start
		for i, c := range closes {
			left := end.Sub(prev)
			interval := left / time.Duration(n-i)
			gap := c.Sub(prev)
			if gap != left && (gap < interval/2-time.Microsecond || gap > interval*3/2+time.Microsecond) {
				t.Errorf("close %d came %v after the previous one; want %v ±50%% (%v left for %d streams)", i, gap, interval, left, n-i)
			}
			prev = c
		}
		assert.False(t, closes[n-1].After(end), "last close at %v; want by the window's end %v", closes[n-1].Sub(start), end.Sub(start))
		// Spread, not bunched: the first half of the streams take about the
		// first half of the window.
		mid := closes[n/2-1].Sub(start)
		assert.True(t, mid > 2*time.Second && mid < 6*time.Second, "half the streams closed after %v; want about 4s", mid)
		assert.LessOrEqual(t, got.PeakRate, 1000.0)
		assert.Greater(t, got.PeakRate, 12.0) // at least 100 streams ÷ 8 s
	})
}

func TestStreamsCappedThenHardAtTheWindowsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, maxRate = 1000, 50
		reg := prometheus.NewRegistry()
		s := newStreams(t, drain.StreamsConfig{Name: "ws", MaxCloseRate: maxRate, Margin: 2 * time.Second, Registerer: reg})
		h := openHandlers(t, s, n, false)
		start := time.Now()
		end := start.Add(8 * time.Second)
		r, got := drainStreams(s, 10*time.Second)
		require.NoError(t, r.Err())

		closes := h.times()
		require.Len(t, closes, n)
		paced := 0
		for i, c := range closes {
			if c.Before(end) {
				paced++
				if i > 0 && c.Sub(closes[i-1]) < time.Second/maxRate {
					t.Errorf("closes %d and %d %v apart; want at least %v (MaxCloseRate %d/s)", i-1, i, c.Sub(closes[i-1]), time.Second/maxRate, maxRate)
				}
				continue
			}
			if !c.Equal(end) {
				t.Errorf("close %d at %v; want paced before %v or hard at it", i, c.Sub(start), end.Sub(start))
			}
		}
		// 8 s at 50/s, each interval 1 to 1.5 times 1/50 s.
		assert.True(t, paced >= 8*maxRate*2/3 && paced <= 8*maxRate, "paced %d; want %d..%d", paced, 8*maxRate*2/3, 8*maxRate)
		assert.Equal(t, drain.StreamReport{Told: n, Paced: paced, Hard: n - paced, PeakRate: maxRate}, got)

		want := fmt.Sprintf(`
# HELP drain_streams_closed_total Streams ended during a drain, by reason (ended: by handler or client before their turn, paced, hard).
# TYPE drain_streams_closed_total counter
drain_streams_closed_total{reason="ended",streams="ws"} 0
drain_streams_closed_total{reason="hard",streams="ws"} %d
drain_streams_closed_total{reason="paced",streams="ws"} %d
# HELP drain_streams_open Long-lived streams registered and not yet ended.
# TYPE drain_streams_open gauge
drain_streams_open{streams="ws"} 0
# HELP drain_streams_close_rate Paced close rate per second while a drain closes streams, else 0.
# TYPE drain_streams_close_rate gauge
drain_streams_close_rate{streams="ws"} 0
`, n-paced, paced)
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
			"drain_streams_closed_total", "drain_streams_open", "drain_streams_close_rate"))
	})
}

func TestStreamsToldEndThemselves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStreams(t, drain.StreamsConfig{Name: "sse"})
		var wg sync.WaitGroup
		for range 10 {
			_, end, ok := s.Open(context.Background())
			require.True(t, ok)
			wg.Go(func() { <-s.Told(); end() }) // says goodbye and leaves at once
		}
		start := time.Now()
		r, got := drainStreams(s, 30*time.Second)
		wg.Wait()
		require.NoError(t, r.Err())
		got.PeakRate = 0 // set if pacing began before the handlers had run
		assert.Equal(t, drain.StreamReport{Told: 10, Ended: 10}, got)
		assert.Equal(t, time.Duration(0), time.Since(start), "the drain waited; want it done once every stream ended")

		give, stop := context.WithCancel(context.Background())
		defer stop()
		ctx, end, ok := s.Open(give)
		assert.False(t, ok, "Open after the drain began")
		assert.Equal(t, give, ctx, "a refused Open returns the context it was given")
		end() // a refused stream's end does nothing, and must not panic
		assert.NoError(t, ctx.Err())
	})
}

func TestStreamsRefusedOnceTold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStreams(t, drain.StreamsConfig{Name: "sse"})
		h := openHandlers(t, s, 3, false)
		hooks := s.Hooks()
		require.NoError(t, hooks[0].Run(context.Background())) // stop_intake
		_, _, ok := s.Open(context.Background())
		assert.False(t, ok)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, hooks[1].Run(ctx))
		h.wg.Wait()
		r := drain.Run(ctx, "again", hooks) // idempotent; reports the totals
		got, _ := r.Hook("sse.close")
		require.NotNil(t, got.Streams)
		assert.Equal(t, 3, got.Streams.Told)
		assert.Equal(t, 3, got.Streams.Paced)
		assert.Equal(t, 1, got.Streams.Refused)
	})
}

func TestStreamsIgnoringContextDoNotHoldTheDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStreams(t, drain.StreamsConfig{Name: "ws", Margin: time.Second})
		h := openHandlers(t, s, 5, true)
		start := time.Now()
		r, got := drainStreams(s, 4*time.Second)
		assert.Equal(t, 4*time.Second, time.Since(start), "the drain returned at %v; want its deadline", time.Since(start))
		assert.True(t, r.DeadlineExceeded)
		res, _ := r.Hook("ws.close")
		assert.Equal(t, drain.TimedOut, res.Outcome)
		// The hook returns its own error ("5 closed streams had not ended")
		// at the deadline, the moment Run gives up on it: either may be first.
		assert.Equal(t, 5, got.Unended)
		assert.Equal(t, 5, got.Paced+got.Hard)
		close(h.release)
		closes := h.times()
		assert.False(t, closes[4].After(start.Add(3*time.Second)), "last close at %v; want by the window's end, 3s", closes[4].Sub(start))
	})
}

func TestStreamsForcedDrainClosesTheRestAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStreams(t, drain.StreamsConfig{Name: "sse"})
		h := openHandlers(t, s, 50, false)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		time.AfterFunc(time.Second, cancel) // a second signal
		r := drain.Run(ctx, "test", s.Hooks())
		assert.True(t, r.Forced)
		closes := h.times()
		require.Len(t, closes, 50)
		assert.Equal(t, time.Second, closes[49].Sub(start), "the last stream closed at %v; want at the forced stop", closes[49].Sub(start))
		res, _ := r.Hook("sse.close")
		require.NotNil(t, res.Streams)
		assert.Equal(t, 50, res.Streams.Paced+res.Streams.Hard)
		assert.Positive(t, res.Streams.Hard)
		assert.Positive(t, res.Streams.Paced)
	})
}

func TestStreamsWithoutDeadlinePaceAtTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStreams(t, drain.StreamsConfig{Name: "sse", MaxCloseRate: 10})
		h := openHandlers(t, s, 20, false)
		start := time.Now()
		r := drain.Run(context.Background(), "test", s.Hooks())
		require.NoError(t, r.Err())
		closes := h.times()
		took := closes[19].Sub(start)
		// 20 intervals, each 1 to 1.5 times 1/10 s.
		assert.True(t, took >= 2*time.Second && took <= 3*time.Second, "took %v; want 2s..3s", took)
	})
}

func TestStreamsReportJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStreams(t, drain.StreamsConfig{Name: "sse"})
		h := openHandlers(t, s, 2, false)
		r, _ := drainStreams(s, 10*time.Second)
		h.wg.Wait()
		b, err := json.Marshal(r)
		require.NoError(t, err)
		assert.Contains(t, string(b), `"name":"sse.close","phase":"release","outcome":"ok"`)
		assert.Contains(t, string(b), `"streams":{"told":2,"ended":0,"paced":2,"hard":0,"unended":0,"refused":0,"peak_rate":`)
	})
}

// NewStreams refuses a bad StreamsConfig naming the field and the value.
func TestNewStreamsRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name string
		give drain.StreamsConfig
		want string
	}{
		{"defaults", drain.StreamsConfig{Name: "sse"}, ""},
		{"no name", drain.StreamsConfig{}, "StreamsConfig.Name is empty"},
		{"negative rate", drain.StreamsConfig{Name: "sse", MaxCloseRate: -1}, "StreamsConfig.MaxCloseRate is -1"},
		{"infinite rate", drain.StreamsConfig{Name: "sse", MaxCloseRate: math.Inf(1)}, "StreamsConfig.MaxCloseRate is +Inf"},
		{"NaN rate", drain.StreamsConfig{Name: "sse", MaxCloseRate: math.NaN()}, "StreamsConfig.MaxCloseRate is NaN"},
		{"rate whose interval overflows", drain.StreamsConfig{Name: "sse", MaxCloseRate: 1e-11}, "StreamsConfig.MaxCloseRate is 1e-11; want more than 1.1e-10 per second"},
		{"rate whose interval is 2⁶³ ns", drain.StreamsConfig{Name: "sse", MaxCloseRate: float64(time.Second) / math.MaxInt64}, "want more than 1.1e-10 per second"},
		{"negative margin", drain.StreamsConfig{Name: "sse", Margin: -time.Second}, "StreamsConfig.Margin is -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := drain.NewStreams(tt.give)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestNewStreamsSameNameTwiceInOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := drain.NewStreams(drain.StreamsConfig{Name: "sse", Registerer: reg})
	require.NoError(t, err)
	_, err = drain.NewStreams(drain.StreamsConfig{Name: "grpc", Registerer: reg})
	require.NoError(t, err, "another name shares the registry")
	_, err = drain.NewStreams(drain.StreamsConfig{Name: "sse", Registerer: reg})
	assert.ErrorContains(t, err, `drain: streams "sse": StreamsConfig.Registerer: metric "drain_streams_open": `)
	assert.ErrorIs(t, err, configerr.ErrConfig, "fxmodule.Run exits 78 on it")
}

// On a real clock a timer wakes late: pacing must still close what fell
// due meanwhile, rather than one stream per wake-up with the rest left to
// be closed at once when the window ends.
func TestStreamsPaceKeepsUpWithLateTimers(t *testing.T) {
	const n = 5000 // 5,000/s over the 1 s window: a close every 200 µs
	s := newStreams(t, drain.StreamsConfig{Name: "sse", MaxCloseRate: 1e6, Margin: 500 * time.Millisecond})
	h := openHandlers(t, s, n, false)
	r, got := drainStreams(s, 1500*time.Millisecond)
	h.wg.Wait()
	require.NoError(t, r.Err())
	// A stall of the whole process in the last milliseconds of the window
	// may leave a tail to be closed at once; one close per wake-up would
	// leave most of them.
	assert.Equal(t, n, got.Paced+got.Hard)
	assert.Less(t, got.Hard, n/10, "closed at once at the window's end")
}

// The phases between StopIntake and Release do their work while the
// streams are closed paced, not after the last one; Close comes after
// every stream has ended, so clients the streams use are still open.
func TestStreamsPacedWhileLaterPhasesRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStreams(t, drain.StreamsConfig{Name: "sse", Margin: 2 * time.Second})
		h := openHandlers(t, s, 10, false)
		start := time.Now()
		var flushed, closed time.Duration
		hooks := append(s.Hooks(),
			drain.Hook{Name: "flush", Phase: drain.Flush, Run: func(context.Context) error { flushed = time.Since(start); return nil }},
			drain.Hook{Name: "close", Phase: drain.Close, Run: func(context.Context) error { closed = time.Since(start); return nil }},
		)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r := drain.Run(ctx, "test", hooks)
		require.NoError(t, r.Err())
		closes := h.times()
		last := closes[len(closes)-1].Sub(start)
		assert.Equal(t, time.Duration(0), flushed, "flush ran after %v; want at once, while the streams close", flushed)
		assert.Greater(t, last, 4*time.Second, "10 streams over an 8 s window")
		assert.GreaterOrEqual(t, closed, last, "close ran at %v, before the last stream ended at %v", closed, last)
	})
}

// Two Streams of one name (nothing refuses that without a Registerer):
// each close hook's result carries its own Streams' report, not the other
// one's, which a match by name gave both.
func TestStreamsReportsOfTwoStreamsOfOneName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newStreams(t, drain.StreamsConfig{Name: "sse"})
		b := newStreams(t, drain.StreamsConfig{Name: "sse"})
		openHandlers(t, a, 2, false)
		openHandlers(t, b, 3, false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r := drain.Run(ctx, "test", append(a.Hooks(), b.Hooks()...))
		require.NoError(t, r.Err())
		var told []int
		for _, h := range r.Hooks {
			if h.Streams != nil {
				told = append(told, h.Streams.Told)
			}
		}
		assert.Equal(t, []int{2, 3}, told, "streams told, per close hook in the report")
	})
}
