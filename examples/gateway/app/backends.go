package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // client-side health checking for round_robin
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// serviceConfig balances commands by room over the backends (see
// hrwBalancer) and sends RPCs only to backends whose grpc.health.v1 status
// for room-service is SERVING: a draining room-service flips to
// NOT_SERVING at once, so new RPCs leave it before its listener closes.
const serviceConfig = `{
	"loadBalancingConfig": [{"` + hrwBalancer + `": {}}],
	"healthCheckConfig": {"serviceName": "` + HealthService + `"}
}`

// connectConfig balances over every address with no health check: the
// connection that tells the readiness check whether a room-service address
// is connectable (see [backends.roomCheck]). No request uses it.
const connectConfig = `{"loadBalancingConfig": [{"round_robin": {}}]}`

// DefaultMaxOwners bounds the cache of direct connections to room owners:
// room-service nodes come and go with every rolling update.
const DefaultMaxOwners = 64

// Errors of the backends outside their running life, as gRPC statuses:
// UNAVAILABLE, so the client retries (on another gateway).
var (
	errNotStarted = status.Error(codes.Unavailable, "gateway: room backends not connected yet")
	errClosed     = status.Error(codes.Unavailable, "gateway: room backends closed: stopping")
)

// backends holds the gRPC connections to room-service: one balanced,
// health-checked connection over ROOM_GRPC_ADDRS, and direct connections
// to the owners named by REDIRECT answers. Nothing connects before Start;
// Close closes everything (the drain's Close phase).
type backends struct {
	cfg       Config
	maxOwners int
	lb        atomic.Pointer[grpc.ClientConn] // health-checked, for requests
	reach     atomic.Pointer[grpc.ClientConn] // unchecked, for readiness
	stalls    *stalls                         // addresses that stopped answering

	mu     sync.Mutex
	owners map[string]*owner // by address
	closed bool
}

// owner is a cached direct connection; users counts calls using it, so an
// entry is evicted (and closed) only while no call uses it.
type owner struct {
	conn  *grpc.ClientConn
	users int
	last  time.Time
}

// reconnectBackoff is grpc-go's default backoff with the ceiling lowered.
var reconnectBackoff = backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}

func newBackends(cfg Config, log *slog.Logger) *backends {
	b := &backends{cfg: cfg, maxOwners: DefaultMaxOwners, owners: make(map[string]*owner)}
	b.stalls = newStalls(b.healthCheck, log)
	return b
}

// Start creates the balanced connections and starts connecting (and
// health-checking) every backend, so the first request and the first
// ready probe do not wait for it.
func (b *backends) Start(context.Context) error {
	conn, err := b.dial(serviceConfig)
	if err != nil {
		return err
	}
	reach, err := b.dial(connectConfig)
	if err != nil {
		return errors.Join(err, conn.Close())
	}
	b.lb.Store(conn)
	b.reach.Store(reach)
	return nil
}

func (b *backends) dial(serviceConfig string) (*grpc.ClientConn, error) {
	target, opts := b.cfg.DNSTarget, []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(serviceConfig),
		// Reconnect within about a second: in a rolling update a backend's
		// address comes back soon, and grpc-go's default backoff (up to
		// 120 s) would leave a fresh replacement unused for long.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnectBackoff, MinConnectTimeout: 2 * time.Second}),
	}
	if target == "" {
		r := manual.NewBuilderWithScheme("rooms")
		addrs := make([]resolver.Address, len(b.cfg.Backends))
		for i, a := range b.cfg.Backends {
			addrs[i] = resolver.Address{Addr: a}
		}
		r.InitialState(resolver.State{Addresses: addrs})
		target, opts = r.Scheme()+":///room-service", append(opts, grpc.WithResolvers(r))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("gateway: room backends %s: %w", target, err)
	}
	conn.Connect()
	return conn, nil
}

// rooms returns a client over the balanced connection.
func (b *backends) rooms() (roompb.RoomsClient, error) {
	conn := b.lb.Load()
	if conn == nil {
		return nil, errNotStarted
	}
	return roompb.NewRoomsClient(conn), nil
}

// conn returns the balanced connection, nil before Start.
func (b *backends) conn() *grpc.ClientConn { return b.lb.Load() }

// withOwner calls fn with a connection directly to addr, reusing a cached
// one. When the cache is full and every entry is in use, the connection is
// made for this call only.
func (b *backends) withOwner(addr string, fn func(*grpc.ClientConn) error) error {
	o, oneOff, err := b.acquire(addr)
	if err != nil {
		return err
	}
	defer b.release(addr, o, oneOff)
	return fn(o.conn)
}

func (b *backends) acquire(addr string) (o *owner, oneOff bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, false, errClosed
	}
	if o := b.owners[addr]; o != nil {
		o.users++
		return o, false, nil
	}
	// NewClient does no I/O (it connects on the first call), so holding
	// the lock across it is fine.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnectBackoff, MinConnectTimeout: 2 * time.Second}))
	if err != nil {
		return nil, false, fmt.Errorf("gateway: owner address %q: %w", addr, err)
	}
	o = &owner{conn: conn, users: 1}
	if len(b.owners) >= b.maxOwners && !b.evictLocked() {
		return o, true, nil
	}
	b.owners[addr] = o
	return o, false, nil
}

// evictLocked closes the least recently used idle entry, if any.
func (b *backends) evictLocked() bool {
	var victim string
	for a, o := range b.owners {
		if o.users == 0 && (victim == "" || o.last.Before(b.owners[victim].last)) {
			victim = a
		}
	}
	if victim == "" {
		return false
	}
	_ = b.owners[victim].conn.Close() // no call uses it
	delete(b.owners, victim)
	return true
}

func (b *backends) release(addr string, o *owner, oneOff bool) {
	if oneOff {
		_ = o.conn.Close()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o.users--
	o.last = time.Now()
}

// Close closes every connection. The drain runs it in its Close phase,
// after in-flight requests have finished.
func (b *backends) Close(context.Context) error {
	b.stalls.close()
	b.mu.Lock()
	b.closed = true
	owners := b.owners
	b.owners = nil
	b.mu.Unlock()
	var errs []error
	for _, lb := range []*atomic.Pointer[grpc.ClientConn]{&b.lb, &b.reach} {
		if conn := lb.Swap(nil); conn != nil {
			errs = append(errs, conn.Close())
		}
	}
	for _, o := range owners {
		errs = append(errs, o.conn.Close())
	}
	return errors.Join(errs...)
}
