package bench

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	alex "github.com/alexliesenfeld/health"
	hellofresh "github.com/hellofresh/health-go/v5"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// The one job every readiness contender is configured for, with the
// budget of the service's health-check guide: results cached for 1 s, each
// check bounded by 300 ms, the whole evaluation by 500 ms.
const (
	cacheTTL     = time.Second
	checkTimeout = 300 * time.Millisecond
	readyTimeout = 500 * time.Millisecond
)

// probeFn is a check's body, shared verbatim by every contender.
type probeFn = func(ctx context.Context) error

type namedCheck struct {
	name string
	fn   probeFn
}

// readyContender is one way to answer GET /healthz/ready.
type readyContender struct {
	name string
	// build returns the handler for checks; the returned func releases what
	// the contender holds (nothing blocks on a hung check).
	build func(b *testing.B, checks []namedCheck) (http.Handler, func())
}

// running is a lifecycle state source stuck at Running: the benchmarks
// measure a serving process.
type running struct{}

func (running) State() lifecycle.State { return lifecycle.Running }

var readyContenders = []readyContender{
	{"empty", func(*testing.B, []namedCheck) (http.Handler, func()) { return empty, func() {} }},
	{"drainkit", buildDrainkit},
	{"alexliesenfeld", buildAlex},
	{"hellofresh", buildHellofresh},
}

// buildDrainkit: readiness.Registry with every check Gating, as in
// production. Close is given no time: a hung check's goroutine is left
// running, and counted, like the peers'.
func buildDrainkit(b *testing.B, checks []namedCheck) (http.Handler, func()) {
	r, err := readiness.New(readiness.Config{
		Service:      "room-service",
		NodeID:       "bench",
		ReadyTimeout: readyTimeout, // the whole evaluation (HEALTH_READY_TIMEOUT)
		CacheTTL:     cacheTTL,     // results reused this long; refreshed single-flight
		CheckTimeout: checkTimeout, // each check's own budget
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, running{}.State)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range checks {
		if err := r.Add(readiness.Check{Name: c.name, Tier: readiness.Gating, Timeout: checkTimeout, Probe: c.fn}); err != nil {
			b.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	r.Mount(mux) // the contenders are probed at /healthz/ready
	return mux, func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = r.Close(ctx)
	}
}

// buildAlex: alexliesenfeld/health's documented synchronous checks
// (health.WithCheck), cached with WithCacheDuration, bounded per check by
// Check.Timeout and as a whole by WithTimeout. Autostart stays on (the
// default): it runs one evaluation in the background at construction.
func buildAlex(b *testing.B, checks []namedCheck) (http.Handler, func()) {
	opts := []alex.CheckerOption{
		alex.WithCacheDuration(cacheTTL),
		alex.WithTimeout(readyTimeout),
	}
	for _, c := range checks {
		opts = append(opts, alex.WithCheck(alex.Check{Name: c.name, Timeout: checkTimeout, Check: c.fn}))
	}
	checker := alex.NewChecker(opts...)
	return alex.NewHandler(checker), checker.Stop
}

// buildHellofresh: hellofresh/health-go with one health.Config per check,
// Timeout per check, SkipOnErr false (every check gates, as above), and
// the default WithMaxConcurrent (runtime.NumCPU). It has no result cache
// and no whole-evaluation deadline: every probe runs every check.
func buildHellofresh(b *testing.B, checks []namedCheck) (http.Handler, func()) {
	cfgs := make([]hellofresh.Config, len(checks))
	for i, c := range checks {
		cfgs[i] = hellofresh.Config{Name: c.name, Timeout: checkTimeout, SkipOnErr: false, Check: c.fn}
	}
	h, err := hellofresh.New(
		hellofresh.WithComponent(hellofresh.Component{Name: "room-service", Version: "bench"}),
		hellofresh.WithChecks(cfgs...),
	)
	if err != nil {
		b.Fatal(err)
	}
	return h.Handler(), func() {}
}

// instant is a healthy check that costs nothing, so the probe path itself
// is measured.
func instant(context.Context) error { return nil }

func instantChecks(n int) []namedCheck {
	checks := make([]namedCheck, n)
	for i := range checks {
		checks[i] = namedCheck{name: "dep" + strconv.Itoa(i), fn: instant}
	}
	return checks
}
