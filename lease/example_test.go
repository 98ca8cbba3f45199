package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/lease"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// A room-service node: acquire a room, forward when another node owns it,
// hand rooms over on drain.
func ExampleManager_Acquire() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		MaxRetries:            1,    // a retried renewal must not outlive the lease
		ContextTimeoutEnabled: true, // per-call deadlines reach the socket
		DialerRetries:         1,    // a refused dial says so at once (Start warns otherwise)
	})
	m, err := lease.New(client, lease.Config{Node: "room-1", Addr: "10.0.0.7:9000", TTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		panic(err)
	}
	defer m.Stop(ctx)

	l, err := m.Acquire(ctx, "42")
	switch {
	case errors.Is(err, lease.ErrHeld), errors.Is(err, lease.ErrDraining):
		to, err := m.Place(ctx, "42") // its holder, or the active node that takes it
		if err != nil {               // no node active, or Redis unreachable: try again
			fmt.Println("retry:", err)
			return
		}
		fmt.Println("forward to", to.Addr)
	case err != nil:
		panic(err)
	default:
		// Do the room's work under l.Context() and pass l.Token() with
		// every write so storage rejects a stale owner.
		<-l.Context().Done()
	}
}

// Wiring leases into a lifecycle.Manager without fx (fxlease does all of
// it but the hand-off): the session starts in a start step, before the
// servers' (so the process is Running only once it can take rooms); the
// gate closes at the flip; rooms are flushed and handed over; the session
// ends in phase Release, freeing the rest at once; the client closes last.
func ExampleManager_HandOff() {
	// New does no I/O: the hooks can be made before Redis is reachable.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1})
	m, err := lease.New(client, lease.Config{Node: "room-1"})
	if err != nil {
		panic(err)
	}
	flush := func(ctx context.Context, l *lease.Lease) error {
		return nil // write room l.ID()'s snapshot, fenced with l.Token()
	}
	handOff, err := m.HandOff(flush, 8)
	if err != nil {
		panic(err)
	}
	release := m.ReleaseHook()
	lc, err := lifecycle.New(lifecycle.Config{Service: "room", NodeID: "room-1"})
	if err != nil {
		panic(err)
	}
	lc.OnStart(m.Start) // before lc.Serve's steps; a start step has no deadline, and Start bounds its own wait
	lc.OnTransition(func(t lifecycle.Transition) {
		if t.To == lifecycle.Draining {
			m.BeginDrain()
		}
	})
	// Readiness gated on the session: a node whose renewals fail takes no new traffic.
	reg, err := readiness.New(readiness.Config{Service: "room", NodeID: "room-1"}, lc.State)
	if err != nil {
		panic(err)
	}
	lc.OnTransition(reg.OnTransition)
	if err := reg.Add(readiness.Check{Name: "leases", Tier: readiness.Gating, Probe: m.Probe}); err != nil {
		panic(err)
	}
	closeClient := drain.Hook{Name: "redis.close", Phase: drain.Close, Run: func(context.Context) error { return client.Close() }}
	closeReadiness := drain.Hook{Name: "readiness.close", Phase: drain.Close, Run: reg.Close}
	if err := lc.AddHook(handOff, release, closeClient, closeReadiness); err != nil {
		panic(err)
	}
	fmt.Println(handOff.Name, handOff.Phase)
	fmt.Println(release.Name, release.Phase)
	// lc.Run(ctx) would start it all and drain at SIGTERM; here the drain
	// alone, which closes the client.
	lc.Shutdown(context.Background(), "example")
	// Output:
	// lease-handoff(room:route:) flush
	// lease-release(room:route:) release
}
