package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/internal/redischeck"
)

// Manager acquires room leases for one node, renews them all from one
// goroutine, and gives them up on drain. Create it with [New], then
// [Manager.Start] it.
type Manager struct {
	client      redis.UniversalClient
	cfg         Config
	holder      string // random per Manager: a restarted process never mistakes an old lease for its own
	prefix      string // node|holder|, the start of every route value we write
	met         *metrics
	now         func() time.Time // time.Now; tests may replace it before Start
	lostAfter   time.Duration    // TTL·2/3
	acquireArgs []any            // acquire.lua's ARGV, the same for every room: boxed once

	gate     chan struct{} // closed when the drain begins; see drain.go
	gateOnce sync.Once
	handOff  atomic.Bool // HandOff was called: rooms are flushed before they move

	mu       sync.Mutex
	leases   map[string]*Lease
	flights  map[string]*flight // one acquisition per room at a time
	running  bool
	started  bool // Start wrote the heartbeat: only then is there one to delete
	stopped  bool
	stopReq  chan struct{}      // closed at stop: the renewer exits, waiting Acquires give up
	stopRun  context.CancelFunc // cancels the renewer's calls when Stop's ctx runs out
	done     chan struct{}      // closed when the renewer has exited
	hbFailed bool               // the last heartbeat write failed (logs on change)
	leftSet  chan struct{}      // closed when a lease leaves the set; one per Manager: waits are rare, leases many
}

// New returns a Manager for client, or an error matching
// lifecycle.ErrConfig for a bad cfg, a *redis.Ring, or client options
// leases cannot work with (see the package doc). It does no I/O.
func New(client redis.UniversalClient, cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := redischeck.Client(client, cfg.CallTimeout); err != nil {
		return nil, badConfig("lease: %w", err)
	}
	_, plain := client.(*redis.Client)
	_, cluster := client.(*redis.ClusterClient)
	if cfg.WaitReplicas > 0 && !plain && !cluster {
		return nil, badConfig("lease: Config.WaitReplicas %d needs a *redis.Client or *redis.ClusterClient, not %T", cfg.WaitReplicas, client)
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms
	holder := hex.EncodeToString(b[:])
	m := &Manager{
		client:    client,
		cfg:       cfg,
		holder:    holder,
		prefix:    cfg.Node + "|" + holder + "|",
		met:       newMetrics(),
		now:       time.Now,
		lostAfter: cfg.TTL * 2 / 3,
		gate:      make(chan struct{}),
		leases:    make(map[string]*Lease),
		flights:   make(map[string]*flight),
	}
	m.acquireArgs = []any{cfg.Node, holder, cfg.TTL.Milliseconds(), fenceRetention.Milliseconds()}
	if err := m.met.register(cfg.Registerer, cfg.RoutePrefix); err != nil {
		return nil, badConfig("lease: register metrics of RoutePrefix %q: %w", cfg.RoutePrefix, err)
	}
	return m, nil
}

// Start checks every server leases are written to ([ErrUnsafeServer]),
// loads the scripts, writes the node heartbeat and starts the renewer,
// which runs until [Manager.Stop] or the Release hook. Each step is
// retried while ctx lasts, at most TTL without a deadline.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.running || m.stopped {
		m.mu.Unlock()
		return errors.New("lease: Start called twice")
	}
	m.mu.Unlock()
	waiting := m.waitLogger()
	startRetry := func(ctx context.Context, call func(context.Context) error) error {
		return m.retry(ctx, nil, waiting(call))
	}
	check := redischeck.Servers{AcceptEviction: m.cfg.AcceptEviction, Unsafe: ErrUnsafeServer, Logger: m.cfg.Logger,
		Retry: startRetry, Retryable: retryable}
	err := check.Check(ctx, m.client)
	if err == nil {
		err = m.loadScripts(ctx, startRetry)
	}
	if err == nil {
		err = startRetry(ctx, func(ctx context.Context) error { return m.writeHeartbeat(ctx, true) })
	}
	if err != nil {
		return fmt.Errorf("lease: start: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	m.running, m.started, m.stopReq, m.stopRun, m.done = true, true, make(chan struct{}), cancel, make(chan struct{})
	m.mu.Unlock()
	go m.renewLoop(runCtx, m.stopReq, m.done)
	return nil
}

// Stop stops the renewer and waits, within ctx, for it and for
// acquisitions in progress; leaves every lease still held to expire (its
// room may not be flushed); and deletes the heartbeat if it is still ours.
// It does all three even if ctx ends first, and may be called again.
func (m *Manager) Stop(ctx context.Context) error {
	err := errors.Join(m.stopRenewer(ctx), m.waitFlights(ctx))
	for _, l := range m.snapshot(false) { // nothing renews them now: their holders must stop
		m.leaveToExpire(l)
	}
	return errors.Join(err, m.deleteHeartbeat(ctx))
}

// loadScripts caches every script on every server, so the first renewal
// round needs no EVAL fallback.
func (m *Manager) loadScripts(ctx context.Context, retry func(context.Context, func(context.Context) error) error) error {
	err := redischeck.EachServer(ctx, m.client, func(ctx context.Context, c redis.UniversalClient, _ string) error {
		return retry(ctx, func(ctx context.Context) error {
			// Not Script.Load on a pipeline: it reads the unanswered reply
			// and sets the script's hash to "".
			pipe := c.Pipeline()
			for _, src := range scriptSources {
				pipe.ScriptLoad(ctx, src)
			}
			_, err := pipe.Exec(ctx)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("load scripts: %w", err)
	}
	return nil
}

// waitStartLogEvery is how often Start says it is still waiting for Redis.
const waitStartLogEvery = 2 * time.Second

// waitLogger wraps Start's calls so that a start waiting on an unreachable
// or refusing Redis says so while it waits, naming the address and the
// last error: at the first failure, then every waitStartLogEvery.
func (m *Manager) waitLogger() func(call func(context.Context) error) func(context.Context) error {
	var mu sync.Mutex
	var logged time.Time
	began := time.Now()
	return func(call func(context.Context) error) func(context.Context) error {
		return func(ctx context.Context) error {
			err := call(ctx)
			if err == nil || ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if logged.IsZero() || time.Since(logged) >= waitStartLogEvery {
				logged = time.Now()
				m.cfg.Logger.Warn("lease: start waiting for Redis", "addr", clientAddr(m.client),
					"waited", time.Since(began).Round(time.Millisecond).String(), "error", err.Error())
			}
			return err
		}
	}
}

// clientAddr names the server (or the Cluster's seed nodes) c talks to.
func clientAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return fmt.Sprintf("%T", c)
}

// stopRenewer stops the renewer and waits for it, cancelling its round
// when ctx ends: none of its writes may land after the heartbeat's delete.
func (m *Manager) stopRenewer(ctx context.Context) error {
	m.mu.Lock()
	m.running, m.stopped = false, true
	req, cancel, done := m.stopReq, m.stopRun, m.done
	m.stopReq, m.stopRun, m.done = nil, nil, nil
	m.mu.Unlock()
	if done == nil {
		return nil
	}
	close(req)
	defer cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	cancel()
	<-done // every call of the renewer honours its context
	return fmt.Errorf("lease: waiting for the renewer: %w", context.Cause(ctx))
}

// leaveToExpire ends l unreleased: its key stays until the TTL passes.
func (m *Manager) leaveToExpire(l *Lease) {
	if l.end(ErrLeftToExpire, true) {
		m.met.leftToExpire.Inc()
	}
}

// Held returns how many leases m holds, those in hand-off included.
func (m *Manager) Held() int { return len(m.snapshot(false)) }

// snapshot copies the lease set without leases whose hooks are running;
// onlyHeld skips those in hand-off too.
func (m *Manager) snapshot(onlyHeld bool) []*Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Lease, 0, len(m.leases))
	for _, l := range m.leases {
		if s := l.state.Load(); s == stateHeld || (!onlyHeld && s == stateHandingOff) {
			out = append(out, l)
		}
	}
	return out
}

// forget removes l from the lease set and wakes Acquires waiting for it.
func (m *Manager) forget(l *Lease) {
	m.mu.Lock()
	if m.leases[l.ID()] == l {
		delete(m.leases, l.ID())
		m.met.held.Set(float64(len(m.leases)))
	}
	if m.leftSet != nil {
		close(m.leftSet)
		m.leftSet = nil
	}
	m.mu.Unlock()
}

func (m *Manager) routeKey(id string) string { return m.cfg.RoutePrefix + "{" + id + "}" }
func (m *Manager) fenceKey(id string) string { return m.cfg.FencePrefix + "{" + id + "}" }
func (m *Manager) nodeKey() string           { return m.nodeKeyOf(m.cfg.Node) }
func (m *Manager) nodeKeyOf(n string) string { return m.cfg.NodePrefix + "{" + n + "}" }
