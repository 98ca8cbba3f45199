package room_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/drainkit/drainkit/examples/room-service/internal/room"
)

func ExampleValidateRoomID() {
	fmt.Println(room.ValidateRoomID("lobby-42"))
	fmt.Println(room.ValidateRoomID("a{b}"))
	// Output:
	// <nil>
	// room: room_id "a{b}": want 1 to 64 characters of [A-Za-z0-9_-]
}

// The wiring main does: the outbox learns about rooms with events from the
// service, both loops run in an errgroup until shutdown, and the drain
// stops the outbox and flushes each room before its lease is released.
// (Not run: it needs Redis and the lease package.)
func ExampleNew() {
	var (
		rdb    redis.UniversalClient = redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
		leases room.Leases           // an adapter over *lease.Manager
		// The lease package's sentinels; stand-ins here.
		errHeld, errDraining = errors.New("lease: held"), errors.New("lease: draining")
	)
	outbox, err := room.NewOutbox(rdb, room.OutboxConfig{})
	if err != nil {
		panic(err)
	}
	svc, err := room.New(rdb, leases, room.Config{ErrHeld: errHeld, ErrDraining: errDraining, Outbox: outbox})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return svc.Run(gctx) })
	g.Go(func() error { return outbox.Run(gctx) })

	// The drain, phase by phase:
	outbox.StopFetching()  // StopIntake
	_ = outbox.Pause(ctx)  // WaitInFlight
	flush := svc.FlushRoom // Flush: the lease hand-off calls it per held lease, then releases
	_ = flush

	stop() // Close: the loops end, then Redis is closed
	_ = g.Wait()
	_ = rdb.Close()
}
