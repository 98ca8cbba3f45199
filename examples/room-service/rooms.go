package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
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
// small interface.
type leaseAdapter struct {
	m   *lease.Manager
	log *slog.Logger
}

func (a leaseAdapter) Acquire(ctx context.Context, id string) (room.Lease, error) {
	held := a.held(id)
	l, err := a.m.Acquire(ctx, id)
	if err != nil {
		return nil, err // a nil interface, not a typed nil pointer
	}
	// Acquire returns the lease this node holds already, if any: a room
	// whose cell was dropped while its lease was kept (a balance hand-off
	// whose flush failed) is reopened under the same lease, which is no
	// new ownership to audit.
	if l != held {
		leaseEvent(a.log, "acquired", l, nil)
	}
	return l, nil
}

// held returns the lease this node holds for id, or nil. The room's cell
// lock keeps another acquisition of id on this node from racing it.
func (a leaseAdapter) held(id string) *lease.Lease {
	for _, l := range a.m.Leases() {
		if l.ID() == id && l.Held() {
			return l
		}
	}
	return nil
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

	cancel context.CancelFunc
	loops  *errgroup.Group
	once   sync.Once
}

func newRooms(rdb redis.UniversalClient, snaps *room.SQLSnapshots, leases *lease.Manager, reg *readiness.Registry, pr prometheus.Registerer,
	lm *lifecycle.Manager, c config, log *slog.Logger) (*rooms, error) {
	roomHB, err := reg.Heartbeat("room_loop", 3*room.DefaultSnapshotInterval)
	if err != nil {
		return nil, err
	}
	outboxHB, err := reg.Heartbeat("outbox_worker", 10*room.DefaultOutboxInterval+2*callBudget)
	if err != nil {
		return nil, err
	}
	flushFailures := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "room_snapshot_flush_failures_total",
		Help: "Snapshot writes that failed, periodic or on drain.",
	})
	outbox, err := room.NewOutbox(rdb, room.OutboxConfig{Heartbeat: outboxHB, Logger: log})
	if err != nil {
		return nil, err
	}
	alive := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "room_outbox_worker_alive",
		Help: "1 while the outbox worker's heartbeat is fresh.",
	}, func() float64 {
		if outboxHB.Fresh() { // a scrape reads the heartbeat; it never evaluates liveness
			return 1
		}
		return 0
	})
	pr.MustRegister(flushFailures, alive)
	bal := newBalancer(rdb, leases, lm, c, log)
	svc, err := room.New(rdb, leaseAdapter{leases, log}, room.Config{
		Placement: bal,
		ErrHeld:   lease.ErrHeld, ErrDraining: lease.ErrDraining,
		Heartbeat: roomHB, Outbox: outbox, SnapshotFailures: flushFailures, Logger: log,
		Snapshots: snaps, // nil without MYSQL_DSN: snapshots in Redis
	})
	if err != nil {
		return nil, err
	}
	bal.svc = svc
	return &rooms{svc: svc, outbox: outbox, leases: leases, bal: bal}, nil
}

// callBudget is a generous bound for one Redis call in a loop turn.
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

// roomHooks are the room service's part of the drain.
func roomHooks(r *rooms, c config) ([]drain.Hook, error) {
	flush, err := r.leases.HandOff(func(ctx context.Context, l *lease.Lease) error {
		return r.svc.FlushRoom(ctx, l)
	}, c.HandOffMax)
	if err != nil {
		return nil, err
	}
	return []drain.Hook{
		{Name: "outbox.stop_fetching", Phase: drain.StopIntake, Run: func(context.Context) error {
			r.outbox.StopFetching()
			return nil
		}},
		{Name: "outbox.pause", Phase: drain.WaitInFlight, Run: r.outbox.Pause},
		flush,
		{Name: "room.loops", Phase: drain.Close, Run: r.stop},
	}, nil
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
