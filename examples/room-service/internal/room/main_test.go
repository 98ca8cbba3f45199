package room

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	quiet       = slog.New(slog.DiscardHandler)
	errHeld     = errors.New("testlease: held")
	errDraining = errors.New("testlease: draining")
)

// testLeases is a minimal lease holder over the real Redis server, standing
// in for the lease package (written in parallel): it writes room:route:{ID}
// = node|leaseID|fence with SET NX and a fence from INCR room:fence:{ID}. It
// never expires anything by itself; tests call expire and lose.
type testLeases struct {
	rdb  *redis.Client
	node string

	mu       sync.Mutex
	draining bool
	held     map[string]*testLease
}

type testLease struct {
	id    string
	token int64
	ctx   context.Context
	lose  context.CancelFunc
}

func (l *testLease) ID() string               { return l.id }
func (l *testLease) Token() int64             { return l.token }
func (l *testLease) Context() context.Context { return l.ctx }

func newTestLeases(rdb *redis.Client, node string) *testLeases {
	return &testLeases{rdb: rdb, node: node, held: make(map[string]*testLease)}
}

func addrOf(node string) string { return node + ".example:13001" }

func (t *testLeases) Acquire(ctx context.Context, id string) (Lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining {
		return nil, fmt.Errorf("acquire %s: %w", id, errDraining)
	}
	if l, ok := t.held[id]; ok {
		return l, nil
	}
	fence, err := t.rdb.Incr(ctx, "room:fence:{"+id+"}").Result()
	if err != nil {
		return nil, err
	}
	val := fmt.Sprintf("%s|lease-%d|%d", t.node, fence, fence)
	ok, err := t.rdb.SetNX(ctx, RouteKey(id), val, 0).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("acquire %s: %w", id, errHeld)
	}
	l := &testLease{id: id, token: fence}
	l.ctx, l.lose = context.WithCancel(context.Background())
	t.held[id] = l
	return l, nil
}

func (t *testLeases) Owner(ctx context.Context, id string) (string, string, int64, error) {
	v, err := t.rdb.Get(ctx, RouteKey(id)).Result()
	if err != nil {
		return "", "", 0, err
	}
	parts := strings.Split(v, "|")
	fence, _ := strconv.ParseInt(parts[2], 10, 64)
	return parts[0], addrOf(parts[0]), fence, nil
}

// lease returns the lease this node holds on id, or nil.
func (t *testLeases) lease(id string) *testLease {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held[id]
}

// lose signals a lost lease by cancelling its context. The route key is
// left alone (see expire).
func (t *testLeases) lose(id string) {
	t.mu.Lock()
	l := t.held[id]
	delete(t.held, id)
	t.mu.Unlock()
	l.lose()
}

// expire deletes the route key, as Redis does when a lease's TTL runs out.
func expire(t *testing.T, rdb *redis.Client, id string) {
	t.Helper()
	require.NoError(t, rdb.Del(context.Background(), RouteKey(id)).Err(), "expire %s", id)
}

func (t *testLeases) setDraining() {
	t.mu.Lock()
	t.draining = true
	t.mu.Unlock()
}

// node is one room-service node: a Service over its own leases.
type node struct {
	svc    *Service
	leases *testLeases
}

func newNode(t *testing.T, rdb *redis.Client, name string, outbox Notifier) node {
	t.Helper()
	leases := newTestLeases(rdb, name)
	svc, err := New(rdb, leases, Config{ErrHeld: errHeld, ErrDraining: errDraining, Outbox: outbox, Logger: quiet})
	require.NoError(t, err, "New")
	return node{svc: svc, leases: leases}
}

func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	return redistest.Start(t).Client()
}

// cellState returns a copy of the state of the node's cell for id.
func (s *Service) cellState(t *testing.T, id string) (State, bool) {
	t.Helper()
	s.mu.Lock()
	c := s.cells[id]
	s.mu.Unlock()
	if c == nil {
		return State{}, false
	}
	require.NoError(t, c.lock(context.Background()), "lock the cell of %s", id)
	defer c.unlock()
	return c.state.clone(), !c.dropped
}
