package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"golang.org/x/sync/errgroup"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/examples/room-service/internal/room"
	"github.com/drainkit/drainkit/lease"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// leaseAdapter lets the room service use the lease manager through its own
// small interface, keeping the leases it hands out in held, for the
// balancer.
type leaseAdapter struct {
	m    *lease.Manager
	log  *slog.Logger
	held *heldLeases
}

func (a leaseAdapter) Acquire(ctx context.Context, id string) (room.Lease, error) {
	held := a.held.get(id)
	l, err := a.m.Acquire(ctx, id)
	if err != nil {
		return nil, err // a nil interface, not a typed nil pointer
	}
	// Acquire returns the lease this node holds already, if any: a room
	// whose cell was dropped while this node still held its lease (its
	// snapshot write fenced before the renewal saw the lease lost) is
	// reopened under the same lease, which is no new ownership to audit.
	if l != held {
		leaseEvent(a.log, "acquired", l, nil)
		a.held.add(l)
	}
	return l, nil
}

// heldLeases is the leases this node acquired whose context is not done:
// those it holds. Ended leases are dropped as they are come across. The
// zero value is ready.
type heldLeases struct {
	mu sync.Mutex
	m  map[string]*lease.Lease
}

func (h *heldLeases) add(l *lease.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = make(map[string]*lease.Lease)
	}
	h.m[l.ID()] = l
}

// get returns the lease held for id, or nil.
func (h *heldLeases) get(id string) *lease.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.m[id]
	if l != nil && l.Context().Err() != nil {
		delete(h.m, id)
		return nil
	}
	return l
}

// ids returns the rooms held.
func (h *heldLeases) ids() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []string
	for id, l := range h.m {
		if l.Context().Err() != nil {
			delete(h.m, id)
			continue
		}
		ids = append(ids, id)
	}
	return ids
}

// leaseEvent writes the audit line from which the end-to-end checker
// rebuilds each room's owners over time: "acquired" is logged after the
// acquisition (so an interval starts late, never early) and "ended" before
// Redis frees the key (lease.Config.OnEnd), so intervals of two owners of
// one room can only overlap if ownership really did.
func leaseEvent(log *slog.Logger, event string, l *lease.Lease, cause error) {
	attrs := []any{"event", event, "room", l.ID(), "fence", l.Token(), "at_unix_nano", time.Now().UnixNano()}
	if cause != nil {
		attrs = append(attrs, "cause", cause.Error())
	}
	log.Info("lease event", attrs...)
}

func (a leaseAdapter) Owner(ctx context.Context, id string) (string, string, int64, error) {
	o, err := a.m.Owner(ctx, id)
	return o.Node, o.Addr, o.Fence, err
}

// rooms is the room service with its three loops (snapshots, outbox,
// balance).
type rooms struct {
	svc    *room.Service
	outbox *room.Outbox
	leases *lease.Manager
	bal    *balancer
	log    *slog.Logger

	cancel context.CancelFunc
	loops  *errgroup.Group
	once   sync.Once
}

func newRooms(rdb redis.UniversalClient, snaps *room.SQLSnapshots, leases *lease.Manager, reg *readiness.Registry, pr prometheus.Registerer,
	lm *lifecycle.Manager, lc lifecycle.Config, c config, log *slog.Logger) (*rooms, error) {
	log = log.With("service", lc.Service, "node_id", lc.NodeID) // on every room line, as on lifecycle's: one stream holds every node
	// The room loop beats at most an interval plus one bounded turn (an
	// interval) apart; three intervals leave room for a loaded node.
	roomBeat, err := reg.Heartbeat("room_loop", 3*c.SnapshotInterval)
	if err != nil {
		return nil, err
	}
	// The outbox beats at most an interval plus one batch (callBudget)
	// apart, whatever Redis does; twice that leaves room for a loaded node.
	const outboxGap = 2 * (room.DefaultOutboxInterval + callBudget)
	outboxBeat, err := reg.Heartbeat("outbox_worker", outboxGap)
	if err != nil {
		return nil, err
	}
	// The outbox's last beat, for room_outbox_worker_alive: a scrape reads
	// it and never evaluates liveness.
	var outboxLast atomic.Int64
	outboxLast.Store(time.Now().UnixNano())
	outboxHB := beatFunc(func() {
		outboxBeat()
		outboxLast.Store(time.Now().UnixNano())
	})
	flushFailures := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "room_snapshot_flush_failures_total",
		Help: "Snapshot writes that failed, periodic or on drain.",
	})
	outbox, err := room.NewOutbox(rdb, room.OutboxConfig{BatchTimeout: callBudget, Heartbeat: outboxHB, Logger: log, WaitReplicas: c.WaitReplicas})
	if err != nil {
		return nil, err
	}
	alive := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "room_outbox_worker_alive",
		Help: "1 while the outbox worker's heartbeat is fresh.",
	}, func() float64 {
		if time.Since(time.Unix(0, outboxLast.Load())) <= outboxGap {
			return 1
		}
		return 0
	})
	pr.MustRegister(flushFailures, alive)
	held := &heldLeases{}
	bal := newBalancer(rdb, held, lm, lc.NodeID, c, log)
	svc, err := room.New(rdb, leaseAdapter{leases, log, held}, room.Config{
		Placement: bal,
		ErrHeld:   lease.ErrHeld, ErrDraining: lease.ErrDraining,
		SnapshotInterval: c.SnapshotInterval, Heartbeat: beatFunc(roomBeat), Outbox: outbox, SnapshotFailures: flushFailures, Logger: log,
		Snapshots:    snaps, // nil without MYSQL_DSN: snapshots in Redis
		WaitReplicas: c.WaitReplicas,
	})
	if err != nil {
		return nil, err
	}
	bal.svc = svc
	return &rooms{svc: svc, outbox: outbox, leases: leases, bal: bal, log: log}, nil
}

// callBudget is a generous bound for one Redis call, or one outbox batch,
// in a loop turn.
const callBudget = time.Second

// start runs the loops until stop; they keep running through the drain
// (the outbox finishes its batch, snapshots go on) and end in Close.
func (r *rooms) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.loops = &errgroup.Group{}
	r.loops.Go(func() error { return r.svc.Run(ctx) })
	r.loops.Go(func() error { return r.outbox.Run(ctx) })
	r.loops.Go(func() error { return r.bal.Run(ctx) })
}

func (r *rooms) stop(context.Context) error {
	var err error
	r.once.Do(func() {
		if r.cancel == nil {
			return
		}
		r.cancel()
		if err = r.loops.Wait(); errors.Is(err, context.Canceled) {
			err = nil
		}
	})
	return err
}

// roomHooks are the room service's part of the drain. The flush has a
// budget of its own, [flushBudget], so that a snapshot store that hangs
// cannot spend the whole drain: the rooms it did not flush are left to
// expire, and release and close still run.
func roomHooks(r *rooms, c config, lc lifecycle.Config) ([]drain.Hook, error) {
	flush, err := r.leases.HandOff(func(ctx context.Context, l *lease.Lease) error {
		return r.svc.FlushRoom(ctx, l)
	}, c.HandOffMax)
	if err != nil {
		return nil, err
	}
	flush.Timeout = flushBudget(lc)
	return []drain.Hook{
		{Name: "outbox.stop_fetching", Phase: drain.StopIntake, Run: func(context.Context) error {
			r.outbox.StopFetching()
			return nil
		}},
		{Name: "outbox.pause", Phase: drain.WaitInFlight, Run: r.outbox.Pause},
		flush,
		// After the hand-off, off its path: a slow events stream must not
		// hold a room's release.
		{Name: "outbox.publish_left", Phase: drain.Release, Timeout: flushBudget(lc) / 2, Run: r.publishLeft},
		{Name: "room.loops", Phase: drain.Close, Run: r.stop},
	}, nil
}

// publishLeft publishes what the outbox left (Outbox.PublishLeft) within
// its hook's budget, a quarter of the drain after the delay, so that the
// Close phase keeps its share. Best effort: what it leaves stays in the
// rooms' outboxes for their next owners, nothing is lost, so its failure
// is logged and not the drain's (no exit code 1 for one room's bad entry).
func (r *rooms) publishLeft(ctx context.Context) error {
	if err := r.outbox.PublishLeft(ctx); err != nil {
		r.log.Warn("room outbox: events left to the rooms' next owners", "err", err)
	}
	return nil
}

// flushBudget is the flush's share of the drain: half of what is left
// after the propagation delay, the other half kept for the phases around
// it (in-flight work before; releasing the leases, deleting the node
// heartbeat and closing the clients after), which must run even when no
// snapshot can be written. Zero, for a config without a timeout, leaves
// only the drain's deadline.
func flushBudget(lc lifecycle.Config) time.Duration {
	return max((lc.DrainTimeout-lc.DrainDelay)/2, 0)
}

// serve starts the loops once fx starts the app (the gRPC and admin
// servers start in hooks of their own, fxgrpc.Server's and fxmodule.Admin's).
func serve(lc fx.Lifecycle, r *rooms) {
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			r.start()
			return nil
		},
		OnStop: r.stop, // a no-op after the drain ran it
	})
}

// beatFunc is a readiness heartbeat's beat as the room.Heartbeat the
// loops call.
type beatFunc func()

func (f beatFunc) Beat() { f() }
