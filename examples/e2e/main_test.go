package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	dirOnce sync.Once
	binDir  string // every build's output, removed by TestMain
	dirErr  error

	// builds of room-service and gateway, with the race detector (true)
	// and without.
	builds = map[bool]*build{true: {}, false: {}}
)

type build struct {
	once sync.Once
	bins e2e.Binaries
	err  error
}

// binaries builds room-service and gateway once per test binary, with the
// race detector unless E2E_SERVICES_RACE=0.
//
// The suite runs race-built services (the default, and what scripts/test
// runs): a race under real load fails the run. A race-built service spends
// several times the CPU of the build users deploy, so on two shared cores
// the backlog after a fault drains measurably slower (about 0.5 s more at
// the 99th percentile after a 3 s Redis stop). Latency quoted against a
// target is therefore measured with E2E_SERVICES_RACE=0, the build users
// deploy; the test process itself keeps -race either way.
func binaries(t *testing.T) e2e.Binaries {
	t.Helper()
	race, err := servicesRace(os.Getenv("E2E_SERVICES_RACE"))
	require.NoError(t, err, "servicesRace")
	t.Logf("services built with the race detector: %v (E2E_SERVICES_RACE)", race)
	return buildServices(t, race)
}

// plainBinaries are the services as users deploy them, whatever
// E2E_SERVICES_RACE says: for a scenario whose load the race detector's
// CPU, not the product, would decide (see TestSubscribersFollowRollingUpdates).
func plainBinaries(t *testing.T) e2e.Binaries {
	t.Helper()
	t.Log("services built with the race detector: false (this scenario's own build)")
	return buildServices(t, false)
}

// buildDir is the directory every build of the test binary writes to.
func buildDir(t *testing.T) string {
	t.Helper()
	dirOnce.Do(func() { binDir, dirErr = os.MkdirTemp("", "drainkit-e2e") })
	require.NoError(t, dirErr, "a directory for the builds")
	return binDir
}

func buildServices(t *testing.T, race bool) e2e.Binaries {
	t.Helper()
	dir := buildDir(t)
	b := builds[race]
	b.once.Do(func() {
		if race {
			dir = filepath.Join(dir, "race")
		} else {
			dir = filepath.Join(dir, "plain")
		}
		if b.err = os.Mkdir(dir, 0o755); b.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		b.bins, b.err = e2e.Build(ctx, dir, race)
	})
	require.NoError(t, b.err, "build the services (race detector: %v)", race)
	return b.bins
}

// servicesRace reads E2E_SERVICES_RACE: empty or 1 builds the services
// with the race detector, 0 without.
func servicesRace(v string) (bool, error) {
	switch v {
	case "", "1":
		return true, nil
	case "0":
		return false, nil
	}
	return false, fmt.Errorf("E2E_SERVICES_RACE=%q: want 1 (race-built services, the default) or 0 (the build users deploy)", v)
}

// bound is the longest any scenario's step may take on a loaded machine.
const bound = 90 * time.Second

// startCluster starts a redis-server and a cluster on it, stopped at
// cleanup. The server wants an ACL user and password, as production Redis
// does, so every scenario runs the room-services' REDIS_URL path.
func startCluster(t *testing.T, cfg e2e.Config) (*e2e.Cluster, *redistest.Server) {
	t.Helper()
	rs := redistest.StartAuth(t, "room-service", "e2e-s3cret")
	cfg.RedisURL = rs.URL()
	return startServices(t, cfg), rs
}

// startServices starts the room-services and gateways on cfg's Redis,
// stopped at cleanup.
func startServices(t *testing.T, cfg e2e.Config) *e2e.Cluster {
	t.Helper()
	if cfg.Bin == (e2e.Binaries{}) {
		cfg.Bin = binaries(t)
	}
	cfg.Dir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	c, err := e2e.Start(ctx, cfg)
	require.NoError(t, err, "start the cluster")
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
	return c
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
	require.NoError(t, err, "check the load's result")
	t.Logf("\n%s", r.Table())
	t.Log(schedWait(c))
	shown := 0
	for kind, n := range res.FailureKinds() {
		if shown++; shown <= 5 {
			t.Logf("failure ×%d: %s", n, kind)
		}
	}
	for _, p := range r.Problems() {
		assert.Fail(t, p)
	}
	assert.Zero(t, r.Failed, "failed requests (first: %s)", firstFailure(res))
	if testing.Verbose() && !fault.From.IsZero() {
		t.Logf("latency by send time, from the fault's start (%s long):\n%s", fault.To.Sub(fault.From).Round(time.Millisecond), latencyBySecond(res, fault.From))
	}
	assert.NotEmpty(t, r.Holds, "lease events in the room-service logs: with none, the ownership checks saw nothing")
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

func TestServicesRaceReadsItsVariable(t *testing.T) {
	for _, tt := range []struct {
		give    string
		want    bool
		wantErr bool
	}{{"", true, false}, {"1", true, false}, {"0", false, false}, {"no", false, true}} {
		got, err := servicesRace(tt.give)
		assert.Equal(t, tt.want, got, "servicesRace(%q) (err %v)", tt.give, err)
		assert.Equal(t, tt.wantErr, err != nil, "servicesRace(%q): an error (err %v)", tt.give, err)
		if err != nil {
			assert.ErrorContains(t, err, `E2E_SERVICES_RACE="no"`, "servicesRace(%q): the error names the variable and its value", tt.give)
		}
	}
}
