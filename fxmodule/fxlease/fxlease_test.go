package fxlease_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxlease"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/internal/testlog"
	"github.com/drainkit/drainkit/lease"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// leaseClient is a client that fits leases, closed by fx on stop.
func leaseClient(addr string) fx.Option {
	return fx.Provide(func(lc fx.Lifecycle) redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 1, ContextTimeoutEnabled: true})
		lc.Append(fx.Hook{OnStop: func(context.Context) error { return rdb.Close() }})
		return rdb
	})
}

func TestModuleHoldsLeasesAndDrainsThem(t *testing.T) {
	srv := redistest.Start(t)
	var (
		leases *lease.Manager
		m      *lifecycle.Manager
		reg    *readiness.Registry
	)
	a := fxmoduletest.Start(t,
		fxmodule.Module, fxlease.Module,
		fx.Supply(lifecycle.Config{Service: "room-service", NodeID: "node-a", DrainTimeout: 10 * time.Second}),
		fx.Supply(lease.Config{Addr: "127.0.0.1:13001", TTL: 3 * time.Second}, quiet()),
		leaseClient(srv.Addr),
		fx.Populate(&leases, &m, &reg),
	)
	ctx := context.Background()
	hb, err := srv.Client().HGetAll(ctx, "room:node:{node-a}").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, hb, "the session is started at start")

	l, err := leases.Acquire(ctx, "42")
	require.NoError(t, err)
	rep := reg.Ready(ctx)
	require.Equal(t, readiness.StatusOK, rep.Status, "%+v", rep)
	assert.Equal(t, "redis_lease", rep.Checks[0].Name)

	r := a.Stop()
	require.Equal(t, lifecycle.ExitClean, r.ExitCode)
	assert.Equal(t, lifecycle.Stopped, m.State())
	stop, ok := r.Hook("fx.OnStop github.com/drainkit/drainkit/fxmodule/fxlease.newManager")
	assert.True(t, ok && stop.Outcome == drain.OK, "the manager's stop, named after the constructor that appended it, in %+v", r.Hooks)
	_, err = leases.Acquire(ctx, "43")
	assert.ErrorIs(t, err, lease.ErrDraining, "the gate closed at the flip")
	<-l.Context().Done()
	n, err := srv.Client().Exists(ctx, "room:node:{node-a}").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the session ended by the drain: room 42 is free")
}

// The lease lines name the service, as lifecycle's do: an operator
// filtering the logs by service sees them.
func TestLeaseLinesNameTheService(t *testing.T) {
	srv := redistest.Start(t)
	var logs testlog.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	a := fxmoduletest.Start(t,
		fxmodule.Module, fxlease.Module,
		fx.Supply(lifecycle.Config{Service: "room-service", NodeID: "node-s", DrainTimeout: 10 * time.Second}, log),
		leaseClient(srv.Addr),
	)
	assert.Equal(t, lifecycle.ExitClean, a.Stop().ExitCode)
	var started map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"lease manager started"`) {
			require.NoError(t, json.Unmarshal([]byte(line), &started))
		}
	}
	require.NotNil(t, started, "no start line in:\n%s", logs.String())
	assert.Equal(t, "room-service", started["service"])
}

// Every lease.Config field has a default, so an app need not supply one:
// the node is the lifecycle's NODE_ID.
func TestModuleNeedsNoLeaseConfig(t *testing.T) {
	srv := redistest.Start(t)
	var leases *lease.Manager
	a := fxmoduletest.Start(t,
		fxmodule.Module, fxlease.Module,
		fx.Supply(lifecycle.Config{Service: "room-service", NodeID: "node-b", DrainTimeout: 10 * time.Second}, quiet()),
		leaseClient(srv.Addr),
		fx.Populate(&leases),
	)
	_, err := leases.Acquire(context.Background(), "7")
	require.NoError(t, err)
	owner, err := leases.Owner(context.Background(), "7")
	require.NoError(t, err)
	assert.Equal(t, "node-b", owner.Node)
	assert.Equal(t, lifecycle.ExitClean, a.Stop().ExitCode)
}

// A client with go-redis's defaults is a configuration mistake: Run exits
// 78 before anything starts, with one line that lists every option to
// change.
func TestModuleRefusesADefaultClientInOneLine(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // as a team has it
	t.Cleanup(func() { _ = rdb.Close() })
	msg := refusal(t, "node-c", rdb)
	for _, want := range []string{"MaxRetries 3: want at most 1", "ContextTimeoutEnabled false: want true"} {
		assert.Contains(t, msg, want)
	}
	assert.Equal(t, 1, strings.Count(msg, "MaxRetries 3"), "said once, not repeated inside fx's wrapping: %s", msg)
}

// The lease's node id is NODE_ID under fxlease, so a NODE_ID that no
// route value can carry is refused naming the variable the operator set.
func TestModuleRefusesABadNodeIDNamingNODE_ID(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	msg := refusal(t, "room 1", rdb)
	assert.Contains(t, msg, `"room 1"`)
	assert.Contains(t, msg, "NODE_ID")
}

// refusal runs an app with fxlease, node id nodeID and client rdb, wants
// exit 78, and returns its one error line's message.
func refusal(t *testing.T, nodeID string, rdb redis.UniversalClient) string {
	var logs testlog.Buffer
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	slog.SetDefault(slog.New(slog.NewJSONHandler(&logs, nil)))
	code := fxmodule.Run(
		fxmodule.Module, fxlease.Module,
		fx.Supply(lifecycle.Config{Service: "room-service", NodeID: nodeID, DrainTimeout: 10 * time.Second}),
		fx.Provide(func() redis.UniversalClient { return rdb }),
	)
	assert.Equal(t, lifecycle.ExitConfig, code)
	var errs []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct{ Level, Msg, Err string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "ERROR" {
			errs = append(errs, rec.Err)
		}
	}
	require.Len(t, errs, 1, "error lines: %q", errs)
	return errs[0]
}

// The gate closes at the flip itself, before the propagation delay: the
// heartbeat says draining while the process still serves, so routers stop
// placing rooms here, and no lease is acquired after the flip.
func TestHeartbeatMarkedDrainingAtTheFlip(t *testing.T) {
	srv := redistest.Start(t)
	var (
		leases *lease.Manager
		m      *lifecycle.Manager
	)
	a := fxmoduletest.Start(t,
		fxmodule.Module, fxlease.Module,
		// The delay outlasts the test: only the flip, not a hook, can mark it.
		fx.Supply(lifecycle.Config{Service: "room-service", NodeID: "node-a", DrainDelay: time.Minute, DrainTimeout: 2 * time.Minute}),
		fx.Supply(lease.Config{TTL: time.Minute}, quiet()), // nor a renewal round, every 20 s
		leaseClient(srv.Addr),
		fx.Populate(&leases, &m),
	)
	flipped := make(chan struct{})
	m.OnTransition(func(tr lifecycle.Transition) {
		if tr.To == lifecycle.Draining {
			close(flipped)
		}
	})
	a.Signal()
	<-flipped
	ctx := context.Background()
	require.Eventually(t, func() bool {
		return srv.Client().HGet(ctx, "room:node:{node-a}", "state").Val() == "draining"
	}, 5*time.Second, 10*time.Millisecond, "heartbeat marked draining during the propagation delay")
	_, err := leases.Acquire(ctx, "42")
	assert.ErrorIs(t, err, lease.ErrDraining, "Acquire after the flip")
	a.Signal() // skip the rest of the delay
	a.Wait()
}

// A lease taken in an OnStart hook of a function that takes the
// *lease.Manager is taken after the Manager started: fx runs a
// constructor before what depends on it, and OnStart hooks in the order
// they were appended. Before its start the Manager answers ErrNotRunning,
// and after the flip ErrDraining for a room it does not hold.
func TestLeaseTakenAtStart(t *testing.T) {
	srv := redistest.Start(t)
	var early, atStart error
	var held *lease.Lease
	var leases *lease.Manager
	a := fxmoduletest.Start(t,
		fxmodule.Module, fxlease.Module,
		fx.Supply(lifecycle.Config{Service: "room-service", NodeID: "node-s", DrainTimeout: 10 * time.Second}, quiet()),
		leaseClient(srv.Addr),
		fx.Invoke(func(lc fx.Lifecycle, l *lease.Manager) {
			_, early = l.Acquire(context.Background(), "7") // in the graph, before any start
			lc.Append(fx.Hook{OnStart: func(ctx context.Context) error {
				held, atStart = l.Acquire(ctx, "7")
				return atStart
			}})
		}),
		fx.Populate(&leases),
	)
	assert.ErrorIs(t, early, lease.ErrNotRunning, "Acquire before the Manager started")
	require.NoError(t, atStart, "Acquire in an OnStart hook appended after fxlease.Module's")
	assert.NoError(t, held.Context().Err(), "the lease taken at start is held")
	a.Stop()
	_, err := leases.Acquire(context.Background(), "8")
	assert.ErrorIs(t, err, lease.ErrDraining, "Acquire after the flip of a room not held")
}

// Example_atStart's hook, as a rolling update runs it: the new instance
// starts while the old one (another node id) still holds "home", and
// becomes Running; the old one's drain hands the room over, and the new
// one takes it. It used to fail its start at once on ErrHeld: a surge
// rollout, which drains the old instance only once the new one is ready,
// never went on.
func TestARoomTakenAtStartAndHeldElsewhereFailsNoStart(t *testing.T) {
	srv := redistest.Start(t)
	app := func(node string, leases **lease.Manager) []fx.Option {
		return []fx.Option{fxmodule.Module, fxlease.Module,
			fx.Supply(lifecycle.Config{Service: "svc", NodeID: node, DrainDelay: 10 * time.Millisecond, DrainTimeout: 10 * time.Second}, quiet()),
			leaseClient(srv.Addr),
			fx.Invoke(takeHomeRoom),
			fx.Populate(leases),
		}
	}
	var oldLeases, newLeases *lease.Manager
	old := fxmoduletest.Start(t, app("old", &oldLeases)...)
	o, err := oldLeases.Owner(context.Background(), "home")
	require.NoError(t, err)
	require.Equal(t, "old", o.Node, "home's holder")

	fxmoduletest.Start(t, app("new", &newLeases)...) // fails the test if the start fails
	require.Equal(t, lifecycle.ExitClean, old.Stop().ExitCode)
	l, err := newLeases.Acquire(context.Background(), "home")
	require.NoError(t, err, "home once the old instance's drain freed it")
	assert.NotZero(t, l.Token())
}

// instance is one instance of Example's service: a lease Manager on srv
// and roomsAPI behind an in-flight tracker, served at the address the
// Manager advertises.
type instance struct {
	leases  *lease.Manager
	tracker *drain.Tracker
	url     string
	reached chan struct{} // a request reached the instance (refused or not); buffered 1
}

func startInstance(t *testing.T, srv *redistest.Server, node string) instance {
	t.Helper()
	return startInstanceWith(t, srv, node, func(h http.Handler) http.Handler { return h })
}

// startInstanceWith is startInstance with wrap around roomsAPI, inside the tracker.
func startInstanceWith(t *testing.T, srv *redistest.Server, node string, wrap func(http.Handler) http.Handler) instance {
	t.Helper()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	m, err := lease.New(rdb, lease.Config{Node: node, Addr: ln.Addr().String(), Logger: quiet()})
	require.NoError(t, err)
	require.NoError(t, m.Start(ctx))
	t.Cleanup(func() { _ = m.Stop(ctx) })
	in := instance{leases: m, tracker: &drain.Tracker{}, reached: make(chan struct{}, 1)}
	api := in.tracker.Middleware(wrap(roomsAPI(m)))
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case in.reached <- struct{}{}:
		default:
		}
		api.ServeHTTP(w, r)
	})}}
	hs.Start()
	t.Cleanup(hs.Close)
	in.url = hs.URL
	return in
}

// drainSession marks in's session draining, as the flip does, and waits
// until Redis shows it: the renewer writes it at once.
func (in instance) drainSession(t *testing.T, srv *redistest.Server, node string) {
	t.Helper()
	in.leases.BeginDrain()
	require.Eventually(t, func() bool {
		return srv.Client().HGet(context.Background(), "room:node:{"+node+"}", "state").Val() == "draining"
	}, 5*time.Second, 10*time.Millisecond, "the draining session marked in Redis")
}

// Example's roomsAPI on an instance that drains: a room nobody holds is
// sent to the active instance, which takes it, as is one that instance
// holds. It used to answer 503 for a room nobody held, failing every such
// request until the instance exited, without a gateway in front to try
// another.
func TestADrainingInstanceForwardsEveryRoomItDoesNotHold(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	active, draining := startInstance(t, srv, "active"), startInstance(t, srv, "draining")
	_, err := active.leases.Acquire(ctx, "held")
	require.NoError(t, err)
	draining.drainSession(t, srv, "draining")

	for _, room := range []string{"held", "free"} {
		resp, err := http.Post(draining.url+"/cmd?room="+room, "text/plain", nil)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "room %q", room)
		o, err := active.leases.Owner(ctx, room)
		require.NoError(t, err)
		assert.Equal(t, "active", o.Node, "holder of room %q", room)
	}
}

// A forward that the holder's drain refuses (503, Retry-After: its intake
// closed while its hand-off has the room) is resent once the hand-off
// moved the room, and the client gets the next owner's answer, not the
// refusal: with the redirect this example used to send, a client that
// does not retry failed every such request. The forwards are no arrivals
// for the holder's drain report, whose advice they made wrong.
func TestAForwardRefusedByADrainingHolderIsResentToTheNextOwner(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	holder, entry := startInstance(t, srv, "holder"), startInstance(t, srv, "entry")
	l, err := holder.leases.Acquire(ctx, "moving")
	require.NoError(t, err)
	holder.drainSession(t, srv, "holder")
	holder.tracker.CloseIntake() // stop_intake; the hand-off still has the room

	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(entry.url+"/cmd?room=moving", "text/plain", strings.NewReader("cmd"))
		assert.NoError(t, err)
		if resp != nil {
			_ = resp.Body.Close()
		}
		answered <- resp
	}()
	<-holder.reached // the forward, refused by the holder's drain
	require.NoError(t, l.Release(ctx), "the hand-off's release")
	resp := <-answered
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the client's answer")
	o, err := entry.leases.Owner(ctx, "moving")
	require.NoError(t, err)
	assert.Equal(t, "entry", o.Node, "the room's next owner")
	assert.Greater(t, o.Fence, l.Token(), "its fence")
	arrived, refused, _ := holder.tracker.Arrivals()
	assert.Equal(t, [2]uint64{0, 0}, [2]uint64{arrived, refused}, "the holder's arrivals and refusals: forwards are neither")
}

// A forward whose answer does not come before its bound (here the
// client's request ends) may have been applied: the client gets 504 without Retry-After, never the 503 with
// Retry-After that says "nothing applied, send it again". It used to get
// the latter, and a resend would apply a command twice.
func TestAForwardCutShortAfterItWasSentIsNotCalledUnapplied(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answer := make(chan struct{})
	defer close(answer)
	holder := startInstanceWith(t, srv, "holder", func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r) // applied
			cancel()          // the forward's bound ends before the answer
			<-answer
		})
	})
	entry := startInstance(t, srv, "entry")
	_, err := holder.leases.Acquire(ctx, "slow")
	require.NoError(t, err)

	rec := httptest.NewRecorder()
	roomsAPI(entry.leases).ServeHTTP(rec, httptest.NewRequestWithContext(rctx, http.MethodPost, "/cmd?room=slow", strings.NewReader("cmd")))
	assert.Equal(t, http.StatusGatewayTimeout, rec.Code, "%s", rec.Body)
	assert.Empty(t, rec.Header().Get("Retry-After"), "Retry-After of an answer that may have been applied")
}

// A request that was itself forwarded is refused (503, Retry-After: its
// sender asks where the room is again) rather than forwarded on: two
// instances that each saw the other active could send it back and forth.
func TestAForwardedRequestIsNotForwardedAgain(t *testing.T) {
	srv := redistest.Start(t)
	active, draining := startInstance(t, srv, "active"), startInstance(t, srv, "draining")
	draining.drainSession(t, srv, "draining")
	req, err := http.NewRequest(http.MethodPost, draining.url+"/cmd?room=free", nil)
	require.NoError(t, err)
	req.Header.Set(drain.ForwardedHeader, "1")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	_, err = active.leases.Owner(context.Background(), "free")
	assert.ErrorIs(t, err, lease.ErrNotHeld, "the room after a refused forward")
}
