package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Manager acquires room leases for one node, renews them all from one
// goroutine, and gives them up on drain. Create it with [New], then
// [Manager.Start] it.
type Manager struct {
	client   redis.UniversalClient
	grouping grouping // which leases may share a renew or release script call
	cfg      Config
	holder   string // random per Manager: a restarted process never mistakes an old lease for its own
	prefix   string // node|holder|, the start of every route value we write
	met      *metrics
	now      func() time.Time // time.Now; tests may replace it before Start

	ttlArg, lostAfter time.Duration
	acquireArgs       []any // acquire.lua's ARGV, the same for every room: boxed once

	draining    atomic.Bool
	drainSignal chan struct{} // size 1: asks the renewer to mark the heartbeat draining

	mu       sync.Mutex
	leases   map[string]*Lease
	flights  map[string]*flight   // one acquisition per room at a time
	pending  map[*flight]struct{} // acquisitions not yet settled, for Stop to wait on
	running  bool
	started  bool // Start wrote the heartbeat: only then is there one to delete
	stopped  bool
	stopReq  chan struct{}      // closed at stop: the renewer exits, Acquire stops waiting on a clean-up
	stopRun  context.CancelFunc // cancels the renewer's calls when Stop's ctx runs out
	done     chan struct{}
	hbFailed bool // guarded by mu: the last heartbeat write failed (logs on change)
	// ended is closed (and cleared) when a lease leaves the set; made by an
	// Acquire that finds the room's lease ended but still in the set, its
	// holder not yet stopped, and waits for it to leave. One per Manager,
	// not one per lease: waits are rare, leases many.
	ended chan struct{}
}

// New returns a Manager for client. It validates cfg and refuses, in one
// error listing each with its value, the client options leases cannot work
// with (see Client settings in the package doc). Every error of New
// matches lifecycle.ErrConfig. It starts nothing and does no I/O.
func New(client redis.UniversalClient, cfg Config) (*Manager, error) {
	if client == nil {
		return nil, badConfig("lease: client is nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := checkClient(client, cfg.CallTimeout); err != nil {
		return nil, err
	}
	if g := groupingFor(client); cfg.WaitReplicas > 0 && g == groupNone {
		return nil, badConfig("lease: Config.WaitReplicas %d needs a *redis.Client or *redis.ClusterClient, not %T", cfg.WaitReplicas, client)
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	holder := hex.EncodeToString(b[:])
	m := &Manager{
		client:      client,
		grouping:    groupingFor(client),
		cfg:         cfg,
		holder:      holder,
		prefix:      cfg.Node + "|" + holder + "|",
		met:         newMetrics(cfg.RoutePrefix),
		now:         time.Now,
		ttlArg:      cfg.TTL,
		lostAfter:   cfg.TTL * 2 / 3,
		drainSignal: make(chan struct{}, 1),
		leases:      make(map[string]*Lease),
		flights:     make(map[string]*flight),
		pending:     make(map[*flight]struct{}),
	}
	m.acquireArgs = []any{cfg.Node, holder, m.ttlArg.Milliseconds(), fenceRetention.Milliseconds()}
	if err := m.met.register(cfg.Registerer); err != nil {
		return nil, badConfig("lease: register metrics of RoutePrefix %q: %w", cfg.RoutePrefix, err)
	}
	return m, nil
}

// Start checks the server (every master on Cluster): it refuses, with
// [ErrUnsafeServer], a Redis older than the scripts need or one whose
// maxmemory-policy may evict lease keys (unless [Config].AcceptEviction),
// and warns about what it cannot read (a managed Redis may refuse INFO or
// CONFIG). It then loads the scripts, writes the node heartbeat, failing if it
// cannot, and starts the renewer goroutine, which renews every held lease
// and the heartbeat each RenewInterval until [Manager.Stop] (or the
// Release hook). ctx bounds the start only: each call gets CallTimeout and
// is retried with backoff while ctx lasts, so a slow but healthy server
// delays the start rather than failing it.
//
// With a deadline on ctx, Start returns by it. Without one, the limit of
// TTL applies to each retried step on its own, not to Start: INFO server,
// INFO memory, CONFIG GET (only when INFO memory does not show the
// policy), SCRIPT LOAD and the heartbeat write, so Start can take up to
// 5·TTL (on Cluster and Ring the per-server steps run on every server at
// once, so still 5·TTL, plus the client's own discovery of the cluster).
// Give ctx a deadline to bound it.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.running || m.stopped {
		m.mu.Unlock()
		return errors.New("lease: Start called twice")
	}
	m.mu.Unlock()
	if err := m.checkServers(ctx); err != nil {
		return fmt.Errorf("lease: start: %w", err)
	}
	if err := m.loadScripts(ctx); err != nil {
		return fmt.Errorf("lease: start: %w", err)
	}
	if err := m.retry(ctx, func(ctx context.Context) error { return m.writeHeartbeat(ctx, true) }); err != nil {
		return fmt.Errorf("lease: start: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	m.running, m.started, m.stopReq, m.stopRun, m.done = true, true, make(chan struct{}), cancel, make(chan struct{})
	m.mu.Unlock()
	go m.renewLoop(runCtx, m.stopReq, m.done)
	return nil
}

// Stop stops the renewer and waits for it and for acquisitions in
// progress (bounded by ctx; those release what they get), ends every
// lease still held with cause [ErrLeftToExpire] (they are not released:
// their rooms may not be flushed) and deletes the heartbeat if it is still
// ours. It is safe to call more than once and after the Release hook.
//
// If ctx ends first, Stop still ends every lease and tries the heartbeat
// delete (within what is left of ctx), then returns the errors joined: the
// renewer is stopped either way, so a lease not ended now would be written
// under past its TTL. An acquisition still in progress then releases what
// it gets in the background.
func (m *Manager) Stop(ctx context.Context) error {
	stopErr := errors.Join(m.stopRenewer(ctx), m.waitFlights(ctx))
	m.abandonAll()
	return errors.Join(stopErr, m.deleteHeartbeat(ctx))
}

// loadScripts caches every script on the server (every master on
// Cluster, every shard on Ring), so the first renewal round needs no EVAL
// fallback: one pipeline per server, retried within ctx.
func (m *Manager) loadScripts(ctx context.Context) error {
	load := func(c redis.UniversalClient) func(context.Context) error {
		return func(ctx context.Context) error {
			// SCRIPT LOAD directly: Script.Load on a pipeline would read
			// the not yet answered reply and set the script's hash to "".
			pipe := c.Pipeline()
			for _, src := range scriptSources {
				pipe.ScriptLoad(ctx, src)
			}
			_, err := pipe.Exec(ctx)
			return err
		}
	}
	each := func(ctx context.Context, c *redis.Client) error { return m.retry(ctx, load(c)) }
	var err error
	switch c := m.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, each)
	case *redis.Ring:
		err = c.ForEachShard(ctx, each)
	default:
		err = m.retry(ctx, load(c))
	}
	if err != nil {
		return fmt.Errorf("load scripts: %w", err)
	}
	return nil
}

// stopRenewer stops the renewer goroutine and waits for it; later
// Acquire calls fail with ErrNotRunning. A renewal round in flight may
// finish (it is bounded by CallTimeout), so no write of it lands after
// what the caller does next, such as deleting the heartbeat; if ctx ends
// first, the round is cancelled.
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

// abandonAll ends every remaining lease without touching Redis: nothing
// renews them any more, so their holders must stop now.
func (m *Manager) abandonAll() {
	for _, l := range m.snapshot(false) {
		if l.end(ErrLeftToExpire, true) {
			m.met.leftToExpire.Inc()
		}
	}
}

// BeginDrain closes the acquisition gate: from its return on, Acquire
// returns [ErrDraining], and the renewer marks the node's heartbeat
// draining at once instead of at its next tick. It does no I/O and never
// blocks, so it can run in a lifecycle listener at the flip (fxlease calls
// it there); [Config].Draining alone is read only at the next Acquire or
// renewal tick.
// The drain's lease hooks call it too, in case the flip did not reach the
// Manager. Later calls do nothing.
func (m *Manager) BeginDrain() {
	// Under mu, so an acquisition registering a lease either finished
	// before this (and its lease is handed over with the rest) or sees the
	// gate closed and releases what it got.
	m.mu.Lock()
	already := m.draining.Swap(true)
	m.mu.Unlock()
	if already {
		return
	}
	select {
	case m.drainSignal <- struct{}{}:
	default:
	}
}

// gateClosed reports whether the gate is closed: BeginDrain ran, or
// [Config].Draining reports true.
func (m *Manager) gateClosed() bool {
	return m.draining.Load() || (m.cfg.Draining != nil && m.cfg.Draining())
}

// refuseAfterFlip returns ErrDraining once the gate is closed, and nil
// before: no acquisition starts after the flip. If [Config].Draining saw
// the flip first, it marks the drain (the heartbeat says draining) now.
func (m *Manager) refuseAfterFlip() error {
	if !m.gateClosed() {
		return nil
	}
	if !m.draining.Load() {
		m.BeginDrain()
	}
	return ErrDraining
}

// Acquire takes the lease on room id for this node. While this Manager
// holds the room, Acquire returns the same *Lease without touching Redis,
// and concurrent calls for one room share one script call. If Redis still
// holds the room for this Manager although it holds no lease locally (a
// retry after a reply was lost, or a lease it already gave up as lost),
// the room is taken over at once with a new fence rather than reported
// held: nobody acts on the old fence. A lease of this Manager whose
// renewal is overdue (no renewal confirmed for TTL·2/3) is ended as lost,
// its context cancelled with [ErrLost], before the new lease is handed out;
// a lease of the room that is ending on another goroutine is waited for
// until its [Config].OnLost and OnEnd have returned, within ctx and until
// Stop.
//
// Errors: an error naming the id for one that is empty, longer than
// [MaxIDLen], or holds '{', '}' or whitespace (before Redis is touched),
// [ErrDraining] once the process drains (also when the acquisition raced
// the flip: the lease is then released), [ErrNotRunning] outside
// Start/Stop, an error matching [ErrHeld] (errors.Is) that names the
// holder's node and fence when someone else holds the room, the Redis
// error, or ctx's error when ctx ended first.
//
// ctx bounds the caller's wait, not the script call, which other callers
// may share. A caller whose ctx ends either gets the lease (its result was
// already decided) or does not; a lease that every caller gave up on is
// released as soon as the script returns, never registered or renewed,
// and a caller arriving while that release runs waits for it first.
func (m *Manager) Acquire(ctx context.Context, id string) (*Lease, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	if err := m.refuseAfterFlip(); err != nil {
		return nil, err
	}
	if l, err := m.local(ctx, id); l != nil || err != nil {
		return l, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), err)
	}
	f, err := m.join(ctx, id)
	if err != nil {
		return nil, err
	}
	select {
	case <-f.done:
		return f.lease, f.err
	case <-ctx.Done():
	}
	if !m.leave(f) { // decided meanwhile: the lease is this caller's
		<-f.done
		return f.lease, f.err
	}
	return nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), ctx.Err())
}

// local returns the lease held for id, if any, or ErrNotRunning. A lease
// whose renewal is overdue, and which the renewer has not ended yet (it
// may be starved of CPU), is ended here as lost: the script about to run
// would give the room a new fence, and the old lease's holder must stop
// before anyone holds the new one. For the same reason, a lease that
// another goroutine is ending (it stays in the set until its OnLost and
// OnEnd returned) is waited for, within ctx and until Stop.
func (m *Manager) local(ctx context.Context, id string) (*Lease, error) {
	for {
		m.mu.Lock()
		l := m.leases[id]
		switch {
		case !m.running:
			m.mu.Unlock()
			return nil, ErrNotRunning
		case l == nil || l.held():
			m.mu.Unlock()
			return l, nil
		case l.state.Load() != stateEnded:
			m.mu.Unlock()
			l.end(m.overdueError(l, m.now()), true) // leaves the set on return, unless another goroutine ended it first
			continue
		}
		if m.ended == nil {
			m.ended = make(chan struct{})
		}
		ended, stopping := m.ended, m.stopReq
		m.mu.Unlock()
		select {
		case <-ended:
		case <-stopping: // the loop returns ErrNotRunning
		case <-ctx.Done():
			return nil, fmt.Errorf("lease: acquire %s: waiting for the lost lease to end: %w", m.routeKey(id), ctx.Err())
		}
	}
}

// acquire runs the acquire script and returns the new lease, not yet
// registered; one flight per id at a time. Attempts are retried while ctx
// lasts and goOn allows (the script is idempotent for this holder), but an
// attempt under way is not cut short when ctx ends: its lease, if any,
// must come back to be released.
func (m *Manager) acquire(ctx context.Context, id string, goOn func() error) (*Lease, error) {
	var (
		sent    time.Time
		res     []any
		unknown time.Time // the last attempt that may have applied unseen (reply lost) was sent then
	)
	err := m.retryDetached(ctx, goOn, func(ctx context.Context) (err error) {
		sent = m.now()
		res, err = m.acquireCall(ctx, id)
		if err != nil && retryable(err) {
			unknown = sent
		}
		return err
	})
	if errors.Is(err, errShortWait) {
		// Acquired on the primary, but not on enough replicas: undo it,
		// even if ctx (Stop) is cancelled.
		if _, val, derr := acquireReply(res); derr == nil {
			fence, _ := strconv.ParseInt(val, 10, 64)
			if rerr := m.newLease(id, fence, m.prefix+val, sent).discard(ctx); rerr != nil {
				err = errors.Join(err, rerr) // the key expires within TTL
			}
		}
		return nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), err)
	}
	if err != nil {
		if !unknown.IsZero() {
			if rerr := m.releaseUnknown(ctx, id, unknown); rerr != nil {
				err = errors.Join(err, rerr) // the key expires within TTL
			}
		}
		return nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), err)
	}
	code, val, err := acquireReply(res)
	if err != nil {
		return nil, fmt.Errorf("lease: acquire %s: %w", m.routeKey(id), err)
	}
	if code == 0 {
		node, fence, _ := parseValue(val)
		return nil, &heldError{ID: id, Node: node, Fence: fence}
	}
	fence, err := strconv.ParseInt(val, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("lease: acquire %s: fence %q: %w", m.routeKey(id), val, err)
	}
	return m.newLease(id, fence, m.prefix+val, sent), nil
}

// releaseUnknown undoes an acquisition that failed after an attempt,
// sent at sent, may have taken the room without our seeing the reply: the
// key may then hold this Manager's value with a fence nobody knows, a room
// with no usable owner for a whole TTL. It deletes the key if it holds
// this Manager's node and holder, whatever the fence (release_holder.lua).
// That is safe because acquire runs in the room's only flight and only
// when this Manager holds no lease of the room. It runs on a context the
// callers cannot cancel, each call within CallTimeout, and starts no
// retry after the key would have expired anyway.
func (m *Manager) releaseUnknown(ctx context.Context, id string, sent time.Time) error {
	expiry := sent.Add(m.cfg.TTL)
	pastExpiry := func() error {
		if m.now().Before(expiry) {
			return nil
		}
		return errPastExpiry
	}
	key := m.routeKey(id)
	err := m.retryIf(context.WithoutCancel(ctx), pastExpiry, func(ctx context.Context) error {
		return releaseHolderScript.Run(ctx, m.client, []string{key}, m.prefix).Err()
	})
	if err != nil {
		return fmt.Errorf("release %s after a lost reply: %w", key, err)
	}
	return nil
}

// acquireCall runs the acquire script and, with Config.WaitReplicas,
// WAITs for that many replicas. WAIT counts the writes of its own
// connection, so the script and WAIT go in one pipeline to the room's
// primary. A short WAIT returns the script's reply with errShortWait.
func (m *Manager) acquireCall(ctx context.Context, id string) ([]any, error) {
	keys := []string{m.routeKey(id), m.fenceKey(id)}
	args := m.acquireArgs
	n := m.cfg.WaitReplicas
	if n == 0 {
		return acquireScript.Run(ctx, m.client, keys, args...).Slice()
	}
	var c redis.Cmdable = m.client
	if cl, ok := m.client.(*redis.ClusterClient); ok {
		primary, err := cl.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		c = primary
	}
	// Half the call's time for the replicas, the rest for the round trip.
	timeout := m.cfg.CallTimeout / 2
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d)/2, time.Millisecond)
	}
	run := func(eval func(pipe redis.Pipeliner) *redis.Cmd) (*redis.Cmd, *redis.Cmd) {
		pipe := c.Pipeline()
		cmd := eval(pipe)
		wait := pipe.Do(ctx, "WAIT", n, timeout.Milliseconds())
		_, _ = pipe.Exec(ctx) // errors are read from each command
		return cmd, wait
	}
	cmd, wait := run(func(p redis.Pipeliner) *redis.Cmd { return acquireScript.EvalSha(ctx, p, keys, args...) })
	if isNoScript(cmd.Err()) {
		cmd, wait = run(func(p redis.Pipeliner) *redis.Cmd { return acquireScript.Eval(ctx, p, keys, args...) })
	}
	res, err := cmd.Slice()
	if cl, ok := m.client.(*redis.ClusterClient); ok && isRedirect(err) {
		// Sent to the primary directly, so the cluster client neither
		// followed the redirect nor noticed the slot moved: refresh its
		// slot map (in the background) and let the retry find the owner.
		cl.ReloadState(ctx)
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if code, _, _ := acquireReply(res); code == 0 {
		return res, nil // someone else's: nothing of ours to replicate
	}
	acked, err := wait.Int64()
	if err != nil {
		return res, fmt.Errorf("%w: WAIT: %w", errShortWait, err)
	}
	if acked < int64(n) {
		return res, fmt.Errorf("%w: %d of Config.WaitReplicas %d within %s", errShortWait, acked, n, timeout)
	}
	return res, nil
}

// isRedirect reports a Cluster MOVED or ASK reply.
func isRedirect(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK"))
}

// acquireReply decodes {code, fence-or-value}.
func acquireReply(res []any) (int64, string, error) {
	if len(res) != 2 {
		return 0, "", fmt.Errorf("unexpected reply %v", res)
	}
	code, ok1 := res[0].(int64)
	val, ok2 := res[1].(string)
	if !ok1 || !ok2 {
		return 0, "", fmt.Errorf("unexpected reply %v", res)
	}
	return code, val, nil
}

// parseValue splits node|holder|fence; ok is false for anything else.
func parseValue(v string) (node string, fence int64, ok bool) {
	parts := strings.Split(v, "|")
	if len(parts) != 3 || parts[0] == "" {
		return "", 0, false
	}
	f, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || f <= 0 {
		return "", 0, false
	}
	return parts[0], f, true
}

// Owner is the current holder of a room, for forwarding.
type Owner struct {
	// Node is the holder's node id.
	Node string
	// Addr is the holder's forwarding address from its heartbeat; empty if
	// the heartbeat is gone (the node stopped or cannot reach Redis).
	Addr string
	// Fence is the holder's fencing token.
	Fence int64
	// Draining reports that the holder's heartbeat is marked draining.
	Draining bool
}

// Owner returns the current holder of room id: [ErrNotHeld] if nobody
// holds it, an error matching [ErrHeld] if the route value cannot be
// parsed. It reads the route, then the holder's heartbeat (two keys, two
// slots, two calls, each with its own CallTimeout and retried while ctx
// lasts).
func (m *Manager) Owner(ctx context.Context, id string) (Owner, error) {
	if err := validateID(id); err != nil {
		return Owner{}, err
	}
	var v string
	err := m.retry(ctx, func(ctx context.Context) (err error) {
		v, err = m.client.Get(ctx, m.routeKey(id)).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return Owner{}, fmt.Errorf("lease: owner of %q: %w", id, ErrNotHeld)
	}
	if err != nil {
		return Owner{}, fmt.Errorf("lease: owner of %q: %w", id, err)
	}
	node, fence, ok := parseValue(v)
	if !ok {
		return Owner{}, &heldError{ID: id}
	}
	var hb []any
	err = m.retry(ctx, func(ctx context.Context) (err error) {
		hb, err = m.client.HMGet(ctx, m.nodeKeyOf(node), "addr", "state").Result()
		return err
	})
	if err != nil {
		return Owner{}, fmt.Errorf("lease: heartbeat of %q: %w", node, err)
	}
	o := Owner{Node: node, Fence: fence}
	o.Addr, _ = hb[0].(string)
	state, _ := hb[1].(string)
	o.Draining = state == stateDraining
	return o, nil
}

// Held returns how many leases m holds, those in hand-off included: the
// leases the renewer renews. A lease whose OnLost or OnEnd is running is
// no longer counted.
func (m *Manager) Held() int { return len(m.snapshot(false)) }

// snapshot copies the lease set, without the leases that ended but have
// not left it yet (their OnLost or OnEnd is running): they are not
// renewed. onlyHeld skips leases in hand-off too.
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

// forget removes l from the lease set if it is still there, and wakes
// the Acquire calls waiting for an ended lease to leave it.
func (m *Manager) forget(l *Lease) {
	m.mu.Lock()
	if m.leases[l.ID()] == l {
		delete(m.leases, l.ID())
		m.met.held.Set(float64(len(m.leases)))
	}
	if m.ended != nil {
		close(m.ended)
		m.ended = nil
	}
	m.mu.Unlock()
}

// releaseResult maps the release script's reply to Release's result.
func (m *Manager) releaseResult(l *Lease, n int64) error {
	switch n {
	case 1:
		m.met.released.Inc()
		return nil
	case 0:
		return fmt.Errorf("lease: release %s: expired: %w", l.label(), ErrNotHeld)
	default:
		return fmt.Errorf("lease: release %s: taken by another holder: %w", l.label(), ErrNotHeld)
	}
}

// callContext bounds one Redis call by CallTimeout.
func (m *Manager) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.cfg.CallTimeout)
}

func (m *Manager) routeKey(id string) string { return m.cfg.RoutePrefix + "{" + id + "}" }
func (m *Manager) fenceKey(id string) string { return m.cfg.FencePrefix + "{" + id + "}" }
func (m *Manager) nodeKey() string           { return m.nodeKeyOf(m.cfg.Node) }
func (m *Manager) nodeKeyOf(node string) string {
	return m.cfg.NodePrefix + "{" + node + "}"
}
