package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/examples/internal/e2e"
	"github.com/drainkit/drainkit/internal/redistest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	bins      e2e.Binaries
	buildErr  error
)

// binaries builds room-service and gateway with the race detector, once
// per test binary.
func binaries(t *testing.T) e2e.Binaries {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "drainkit-e2e"); buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		bins, buildErr = e2e.Build(ctx, binDir, true)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bins
}

// bound is the longest any scenario's step may take on a loaded machine.
const bound = 90 * time.Second

// startCluster starts a redis-server and a cluster on it, stopped at
// cleanup. The server wants an ACL user and password, as production Redis
// does, so every scenario runs the room-services' REDIS_URL path.
func startCluster(t *testing.T, cfg e2e.Config) (*e2e.Cluster, *redistest.Server) {
	t.Helper()
	rs := redistest.StartAuth(t, "room-service", "e2e-s3cret")
	cfg.Bin, cfg.RedisURL, cfg.Dir = binaries(t), rs.URL(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	c, err := e2e.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	markSched(c)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.All() {
				t.Logf("--- %s output (last lines):\n%s", n.Name, lastLines(n.Output(), 30))
			}
			t.Logf("--- balancer log (last lines):\n%s", lastLines(c.BalancerLog(), 40))
		}
		c.Close()
	})
	return c, rs
}

// load runs l in the background; the returned function waits for it. The
// load belongs to the test: should the test end first (a t.Fatal), its
// cleanup cancels the load and waits for it, so no request of this test
// reaches the next one's cluster.
func load(t *testing.T, c *e2e.Cluster, l e2e.Load) func() *e2e.LoadResult {
	t.Helper()
	l.URL = c.URL()
	if l.Prefix == "" {
		l.Prefix = strings.ReplaceAll(t.Name(), "/", "_") + "-"
	}
	ctx, cancel := context.WithCancel(context.Background())
	var res *e2e.LoadResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		res = l.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() *e2e.LoadResult {
		<-done
		return res
	}
}

// check reads every room back and fails the test on any broken invariant
// or any failed request: every scenario's fault is shorter than the
// gateways' request deadline, so the gateways must wait it out. fault is
// the window whose latency the report shows.
func check(t *testing.T, c *e2e.Cluster, res *e2e.LoadResult, drained []e2e.Drained, fault e2e.Window) *e2e.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	r, err := e2e.Check(ctx, c, res, drained, fault)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", r.Table())
	t.Log(schedWait(c))
	shown := 0
	for kind, n := range res.FailureKinds() {
		if shown++; shown <= 5 {
			t.Logf("failure ×%d: %s", n, kind)
		}
	}
	for _, p := range r.Problems() {
		t.Error(p)
	}
	if r.Failed != 0 {
		t.Errorf("failed requests: got %d; want 0 (first: %s)", r.Failed, firstFailure(res))
	}
	if testing.Verbose() && !fault.From.IsZero() {
		t.Logf("latency by send time, from the fault's start (%s long):\n%s", fault.To.Sub(fault.From).Round(time.Millisecond), latencyBySecond(res, fault.From))
	}
	if len(r.Holds) == 0 {
		t.Error("no lease events in the room-service logs: the ownership checks saw nothing")
	}
	return r
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// latencyBySecond shows, per second of send time relative to from, how
// many commands were sent and their slowest answer: where a fault's
// latency comes from.
func latencyBySecond(res *e2e.LoadResult, from time.Time) string {
	type bucket struct {
		n   int
		max time.Duration
	}
	buckets := map[int]*bucket{}
	lo, hi := 0, 0
	for i := range res.Outcomes {
		o := &res.Outcomes[i]
		s := int(math.Floor(o.Sent.Sub(from).Seconds()))
		b := buckets[s]
		if b == nil {
			b = &bucket{}
			buckets[s] = b
		}
		b.n++
		b.max = max(b.max, o.Latency())
		lo, hi = min(lo, s), max(hi, s)
	}
	var sb strings.Builder
	for s := lo; s <= hi; s++ {
		if b := buckets[s]; b != nil {
			fmt.Fprintf(&sb, "  t%+ds: %3d sent, slowest %s\n", s, b.n, b.max.Round(time.Millisecond))
		}
	}
	return sb.String()
}
