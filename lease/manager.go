package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/internal/redischeck"
)

// Manager acquires room leases for one node, renews them all from one
// goroutine, and gives them up on drain. Create it with [New], then
// [Manager.Start] it.
type Manager struct {
	client    redis.UniversalClient
	cfg       Config
	met       *metrics
	now       func() time.Time // time.Now; tests may replace it before Start
	lostAfter time.Duration    // TTL·2/3

	holder    string                    // random per Manager: its own session is known after a lost reply
	sess      atomic.Pointer[session]   // the current session; nil while there is none
	okAt      atomic.Pointer[time.Time] // when its last confirmed renewal (or its start) was sent, monotonic clock kept
	wroteAt   atomic.Pointer[time.Time] // when a session start or renewal was last sent: every session of ours is gone from Redis a TTL later
	lastEpoch atomic.Int64              // the last epoch this process started; 0 before
	listed    atomic.Pointer[listing]   // the last write of this node into the index of sessions (Place)
	starts    atomic.Int64              // session start attempts sent: a late one never replaces a later one's epoch
	hbFailed  atomic.Bool               // the last session renewal failed (logs on change)
	startErr  atomic.Pointer[error]     // why the last start of a session after a loss failed; nil once one started (logs on change)
	startMu   sync.Mutex                // one session start or loss at a time: a start waits for a loss to tell every holder

	gate     chan struct{} // closed when the drain begins; see drain.go
	gateOnce sync.Once
	handOff  atomic.Bool // HandOff was called: rooms are flushed before they move
	// lostDraining counts the leases lost after the gate closed and
	// before a hand-off took them, for the hand-off's line.
	lostDraining atomic.Int64

	mu       sync.Mutex
	leases   map[string]*Lease
	flights  map[string]*flight // one acquisition per room at a time
	left     map[string]int64   // fence of each room left to expire: its route stays until the session ends
	running  bool
	starting bool // a Start is in progress
	stopped  bool
	stopReq  chan struct{}      // closed at stop: the renewer exits, waiting Acquires give up
	stopRun  context.CancelFunc // cancels the renewer's calls when Stop's ctx runs out
	done     chan struct{}      // closed when the renewer has exited
	settled  chan struct{}      // see settledLocked
	aborted  chan struct{}      // closed when the Stop the Release hook's Abort started has returned
	// halt ends when a Stop's ctx ends: a session start in progress (an
	// Acquire's, which Stop waits for on startMu) ends with it.
	halt    context.Context
	haltNow context.CancelFunc
}

// New returns a Manager for client, or an error matching
// lifecycle.ErrConfig for a bad cfg, a *redis.Ring, or client options
// leases cannot work with (see the package doc). It does no I/O.
func New(client redis.UniversalClient, cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := redischeck.Client(client, cfg.CallTimeout); err != nil {
		return nil, configerr.Errorf("lease: %w", err)
	}
	_, plain := client.(*redis.Client)
	_, cluster := client.(*redis.ClusterClient)
	if cfg.WaitReplicas > 0 && !plain && !cluster {
		return nil, configerr.Errorf("lease: Config.WaitReplicas %d needs a *redis.Client or *redis.ClusterClient, not %T", cfg.WaitReplicas, client)
	}
	m := &Manager{
		holder:    rand.Text(),
		client:    client,
		cfg:       cfg,
		met:       newMetrics(),
		now:       time.Now,
		lostAfter: cfg.TTL * 2 / 3,
		gate:      make(chan struct{}),
		leases:    make(map[string]*Lease),
		flights:   make(map[string]*flight),
	}
	m.halt, m.haltNow = context.WithCancel(context.Background())
	if err := m.met.register(cfg.Registerer, cfg.RoutePrefix); err != nil {
		return nil, err
	}
	return m, nil
}

// Start checks every server leases are written to ([ErrUnsafeServer]),
// loads the scripts, starts the node's session and its renewer, which runs
// until [Manager.Stop] or the Release hook. Each step is retried while ctx
// lasts, without a deadline at most TTL (TTL + 2·CallTimeout for the
// session): a session of the node id that another process left (a crash,
// or a drain still ending) is waited for, and one still renewed when ctx
// ends fails the start, naming the node id, as does a Stop meanwhile
// ([ErrNotRunning]).
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	switch {
	case m.stopped:
		m.mu.Unlock()
		return fmt.Errorf("lease: start: stopped before: %w", ErrNotRunning)
	case m.running || m.starting:
		m.mu.Unlock()
		return errors.New("lease: Start called twice")
	}
	m.starting = true // a second Start would run a second renewer that Stop never stops
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.starting = false
		m.mu.Unlock()
	}()
	warnings := []string{redischeck.DialWarning(m.client, m.cfg.CallTimeout), redischeck.ReloadWarning(m.client, m.cfg.TTL/2)}
	if redischeck.Sentinel(m.client) && m.cfg.TTL < sentinelMinTTL {
		which := ""
		if _, ok := m.client.(*redis.ClusterClient); ok { // or a ClusterSlots of the caller's own
			which = " (if this Cluster client's ClusterSlots follows one, as NewFailoverClusterClient's does)"
		}
		warnings = append(warnings, fmt.Sprintf("a Sentinel failover%s names the new primary about a second after promoting it, "+
			"which a TTL of %s does not outlast: every failover, planned or not, costs every room; "+
			"docs/leases.md (\"On Redis Sentinel\") advises a TTL of at least %s, and more to keep them through a primary's crash", which, m.cfg.TTL, sentinelMinTTL))
	}
	for _, w := range warnings {
		if w != "" {
			m.cfg.Logger.Warn("lease: "+w, "node_id", m.cfg.Node)
		}
	}
	retry := m.startRetry()
	check := redischeck.Servers{AcceptEviction: m.cfg.AcceptEviction, Unsafe: ErrUnsafeServer, Logger: m.cfg.Logger.With("node_id", m.cfg.Node),
		Retry: retry, Retryable: retryable}
	err := check.Check(ctx, m.client) // every server first: an unsafe one is the error to see
	if err == nil {
		err = m.loadScripts(ctx, retry)
	}
	if err == nil {
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if _, ok := ctx.Deadline(); !ok {
			// A crashed process's session of this node id lives at most a TTL
			// after the crash; the retries' backoff (at most CallTimeout) needs
			// a margin past it, or a restart at once after a kill fails half
			// the time.
			sctx, cancel = context.WithTimeout(ctx, m.cfg.TTL+2*m.cfg.CallTimeout)
		}
		err = retry(sctx, m.startSession)
		cancel()
	}
	if err != nil {
		return fmt.Errorf("lease: start: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	if m.stopped { // Stop came once the session had started, and ended it: nothing to renew
		m.mu.Unlock()
		cancel()
		return fmt.Errorf("lease: start: stopped meanwhile: %w", ErrNotRunning)
	}
	stop, done := make(chan struct{}), make(chan struct{}) // the renewer's own: a Stop from here on clears m's
	m.running, m.stopReq, m.stopRun, m.done = true, stop, cancel, done
	m.mu.Unlock()
	go m.renewLoop(runCtx, stop, done)
	m.cfg.Logger.Info("lease manager started", "node_id", m.cfg.Node, "forward_addr", m.cfg.Addr, "redis_addr", clientAddr(m.client), "epoch", m.lastEpoch.Load(),
		"ttl", m.cfg.TTL.String(), "renew_interval", m.cfg.RenewInterval.String(), "route_prefix", m.cfg.RoutePrefix)
	return nil
}

// Stop stops the renewer and ends every lease still held, with
// [ErrReleased], or [ErrLeftToExpire] once [Manager.HandOff] was called
// (not flushed: its next owner recovers the room); it waits within ctx for
// the renewer and for acquisitions in progress, then ends this process's
// session in one command, so every room is free at once. It does all of
// it even if ctx ends first (the session's end gets at least one attempt,
// and none once Redis has expired the session), and may be called again:
// once the session has ended, it sends nothing.
func (m *Manager) Stop(ctx context.Context) error {
	// Stopped from here: no lease registers, no start begins; one in
	// progress (an Acquire's) finishes first, under startMu.
	first, err := m.stopRenewer(ctx)
	defer context.AfterFunc(ctx, m.haltNow)() // a start in progress holds startMu: it keeps to ctx too
	m.startMu.Lock()
	m.mu.Lock()
	m.sess.Store(nil) // a Release from now on finds its session ended and sends nothing; a flight's clean-up stops retrying
	m.mu.Unlock()
	released, left := 0, 0
	var ended []string // the rooms Stop ended: with the hand-off's left to expire, the rooms held until the session's end
	for _, l := range m.endAll(m.snapshot(), func(l *Lease) error {
		if l.state.Load() == stateHeld && !m.handOff.Load() {
			return ErrReleased
		}
		return ErrLeftToExpire
	}) {
		ended = append(ended, l.ID())
		if l.cause == ErrReleased {
			released++
		} else {
			left++
			m.met.leftToExpire.Inc()
		}
	}
	if first {
		// Without HandOff no room was flushed before it moved: said here, as
		// a service that forgot the hook loses state without another word.
		// Not "released" or "left_to_expire": the hand-off's line counts
		// its own rooms so, and these are only those it did not have.
		m.cfg.Logger.Info("lease manager stopping: the session's end frees the rooms still held", "node_id", m.cfg.Node,
			"still_held", released+left, "hand_off", m.handOff.Load())
	}
	m.startMu.Unlock()
	err = errors.Join(err, m.waitFlights(ctx)) // a flight waiting for startMu above ends now: stopped
	// Nothing to end once a TTL has passed since the last session write, and
	// a call's time (the server may have applied it that much later): Redis
	// has expired the session, and a Redis outage must not hold the drain.
	if wrote := m.wroteAt.Load(); wrote != nil && m.now().Before(wrote.Add(m.cfg.TTL+m.cfg.CallTimeout)) {
		ectx, budget := ctx, wrote.Add(m.cfg.TTL+m.cfg.CallTimeout).Sub(m.now())
		if d, ok := ctx.Deadline(); ctx.Err() != nil || ok && time.Until(d) < m.cfg.CallTimeout {
			// One attempt still, if ctx ended or nearly: the rooms move now, not at the session's expiry.
			ectx, budget = context.WithoutCancel(ctx), m.cfg.CallTimeout
		}
		ectx, cancel := context.WithTimeout(ectx, max(budget, m.cfg.CallTimeout))
		defer cancel()
		eerr := m.retry(ectx, nil, func(ctx context.Context) error {
			return sessionEndScript.Run(ctx, m.client, []string{m.nodeKey()}, m.holder).Err()
		})
		if eerr != nil {
			m.mu.Lock()
			stay := len(m.left) // the hand-off's rooms left to expire: their routes stay too
			for _, id := range ended {
				if _, counted := m.left[id]; !counted { // a flush cut short by Stop leaves its room there too
					stay++
				}
			}
			m.mu.Unlock()
			held := "" // the session stays until it expires, holding nothing
			switch {
			case stay == 1:
				held = "; 1 room stays held until the session expires"
			case stay > 1:
				held = fmt.Sprintf("; %d rooms stay held until the session expires", stay)
			}
			end := fmt.Errorf("lease: end session %s at %s: %w%s", m.nodeKey(), m.sessionAddr(), eerr, held)
			if err != nil { // one line still, for a one-line log
				return fmt.Errorf("%w; %w", err, end)
			}
			return end
		}
		m.wroteAt.Store(nil) // ended: a Stop again (after Run returned, the client closed) sends nothing
	}
	m.met.released.Add(float64(released))
	return err
}

// loadScripts fills every server's script cache: no EVAL in the first round.
func (m *Manager) loadScripts(ctx context.Context, retry func(context.Context, func(context.Context) error) error) error {
	return redischeck.EachServer(ctx, m.client, retry, func(ctx context.Context, c redis.UniversalClient, addr string) error {
		err := retry(ctx, func(ctx context.Context) error {
			// Not Script.Load on a pipeline: it sets the hash to "" from no reply.
			pipe := c.Pipeline()
			for _, src := range scriptSources {
				pipe.ScriptLoad(ctx, src)
			}
			_, err := pipe.Exec(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("load scripts on %s: %w", addr, err)
		}
		return nil
	})
}

const waitStartLogEvery = 2 * time.Second // how often Start says it still waits for Redis

// startRetry returns Start's retry, which logs the address and last error
// while Redis fails: at once, then every waitStartLogEvery.
func (m *Manager) startRetry() func(context.Context, func(context.Context) error) error {
	var mu sync.Mutex
	var logged time.Time
	began := time.Now()
	return func(ctx context.Context, call func(context.Context) error) error {
		return m.retry(ctx, nil, func(ctx context.Context) error {
			err := call(ctx)
			if err == nil || !retryable(err) || ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err // nothing waited for: a refusal (CONFIG on a managed Redis, say) is the caller's to say
			}
			mu.Lock()
			defer mu.Unlock()
			if logged.IsZero() || time.Since(logged) >= waitStartLogEvery {
				logged = time.Now()
				msg := "lease: start waiting for Redis"
				switch {
				case errors.Is(err, errSessionBusy):
					msg = "lease: start waiting for another process's session of this node id: it expires within a TTL if that process is gone; a live one keeps it (one NODE_ID for two processes, or two Managers with one NodePrefix?)"
				case redischeck.NoMaster(err):
					msg = "lease: start waiting for the Sentinel master: " + redischeck.NoMasterCause
				case redis.HasErrorPrefix(err, "READONLY"):
					// New cannot see FailoverOptions.ReplicaOnly: go-redis keeps it out of the client's options.
					msg = "lease: start waiting for a primary: the server is a replica (FailoverOptions.ReplicaOnly, or a replica's address?); a failover in progress ends within seconds"
				}
				m.cfg.Logger.Warn(msg, "node_id", m.cfg.Node, "redis_addr", clientAddr(m.client),
					"waited", time.Since(began).Round(time.Millisecond).String(), "error", err.Error())
			}
			return err
		})
	}
}

// sentinelMinTTL is the least TTL docs/leases.md advises on Sentinel.
const sentinelMinTTL = 3 * time.Second

// clientAddr names the server (or the Cluster's seed nodes) c talks to.
func clientAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return redischeck.Addr(c)
	case *redis.ClusterClient:
		if len(c.Options().Addrs) == 0 { // NewFailoverClusterClient's, or a map of the caller's own
			return "ClusterOptions.ClusterSlots"
		}
		return strings.Join(c.Options().Addrs, ",")
	}
	return fmt.Sprintf("%T", c)
}

// sessionAddr names the server the node's session is written to, for its
// log lines: on a Cluster, the primary the client maps its slot to (the one
// a hung primary's failure is about), not the seed list.
func (m *Manager) sessionAddr() string {
	if cl, ok := m.client.(*redis.ClusterClient); ok {
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.CallTimeout) // the slot map is cached: no call
		defer cancel()
		if c, err := cl.MasterForKey(ctx, m.nodeKey()); err == nil {
			return c.Options().Addr
		}
	}
	return clientAddr(m.client)
}

// stopRenewer stops the renewer and waits for it, cancelling its round
// when ctx ends: none of its writes may land after the session's end. A
// Stop concurrent with the one that stopped it (the Release hook's Abort,
// then fx's OnStop) waits for it too. first says whether this call stopped
// a running Manager.
func (m *Manager) stopRenewer(ctx context.Context) (first bool, err error) {
	m.mu.Lock()
	first = m.running
	m.running, m.stopped = false, true
	req, cancel, done := m.stopReq, m.stopRun, m.done
	m.stopReq = nil // closed once, below; done and stopRun stay for a later Stop
	m.mu.Unlock()
	if done == nil {
		return first, nil
	}
	if req != nil {
		close(req)
	}
	defer cancel()
	select {
	case <-done:
		return first, nil
	case <-ctx.Done():
	}
	cancel()
	<-done // every call of the renewer honours its context
	return first, fmt.Errorf("lease: waiting for the renewer: %w", context.Cause(ctx))
}

// endAll ends leases at once, for a session's loss or Stop: every context
// is cancelled (cause gives each one's cause) and every lease leaves the
// set before any hook runs, so hooks that take their time delay no lease's
// end past the session's expiry, and a hook's Acquire of another of these
// rooms waits for the next session (within its ctx, up to two TTLs), not
// for hooks still to come. No new lease of these rooms comes before their hooks have run:
// the caller starts the next session, or ends Stop, only once endAll has
// returned. It returns the leases it ended, once those another goroutine
// was ending have left the set too: their hooks return before the session goes.
func (m *Manager) endAll(leases []*Lease, cause func(*Lease) error) []*Lease {
	mine := make([]*Lease, 0, len(leases))
	var others []*Lease
	for _, l := range leases {
		c := cause(l)
		if l.claim() {
			l.count(c)
			l.cancelWith(c)
			mine = append(mine, l)
		} else {
			others = append(others, l)
		}
	}
	m.forget(mine...)
	for _, l := range mine {
		l.runHooks(l.cause) // set by cancelWith on this goroutine
	}
	for _, l := range others {
		m.waitGone(l)
	}
	return mine
}

// leaveToExpire ends l unreleased: its route stays until the session ends.
func (m *Manager) leaveToExpire(l *Lease) {
	m.mu.Lock()
	if m.left == nil {
		m.left = make(map[string]int64)
	}
	m.left[l.ID()] = l.Token()
	m.mu.Unlock()
	if l.end(ErrLeftToExpire) {
		m.met.leftToExpire.Inc()
	}
}

// snapshot copies the lease set: held leases, those in hand-off and those still ending.
func (m *Manager) snapshot() []*Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Lease, 0, len(m.leases))
	for _, l := range m.leases {
		out = append(out, l)
	}
	return out
}

// waitGone waits until l has left the lease set: whoever ended it has
// cancelled its context and run its hooks (see Lease.end).
func (m *Manager) waitGone(l *Lease) {
	m.mu.Lock()
	for m.leases[l.ID()] == l {
		settled := m.settledLocked()
		m.mu.Unlock()
		<-settled
		m.mu.Lock()
	}
	m.mu.Unlock()
}

// forget removes leases from the lease set and wakes Acquires waiting for them.
func (m *Manager) forget(leases ...*Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range leases {
		if m.leases[l.ID()] == l {
			delete(m.leases, l.ID())
		}
	}
	m.met.held.Set(float64(len(m.leases)))
	m.wakeSettled()
}

// settledLocked, under mu, returns the channel closed when the lease set,
// the flights or the session next change: what every wait in the Manager
// waits on (one channel per Manager: waits are rare).
func (m *Manager) settledLocked() <-chan struct{} {
	if m.settled == nil {
		m.settled = make(chan struct{})
	}
	return m.settled
}

// wakeSettled, under mu, wakes every wait on settledLocked.
func (m *Manager) wakeSettled() {
	if m.settled != nil {
		close(m.settled)
		m.settled = nil
	}
}

func (m *Manager) routeKey(id string) string { return m.cfg.RoutePrefix + "{" + id + "}" }
func (m *Manager) fenceKey(id string) string { return m.cfg.FencePrefix + "{" + id + "}" }
func (m *Manager) nodeKey() string           { return m.nodeKeyOf(m.cfg.Node) }
func (m *Manager) nodeKeyOf(n string) string { return m.cfg.NodePrefix + "{" + n + "}" }
