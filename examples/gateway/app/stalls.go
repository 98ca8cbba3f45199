package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Health checks of a stalled address: one every stallRecheck, each given
// stallCheckTimeout; after stallForget without an answer the address is
// dropped (it left: its next timed-out attempt marks it again).
const (
	stallRecheck      = 100 * time.Millisecond
	stallCheckTimeout = 250 * time.Millisecond
	stallForget       = time.Minute
)

// stalls holds the room-service addresses that let an attempt's budget
// pass (a frozen process, a port that accepts while nothing answers). The
// pickers route around them and no REDIRECT is followed to one, so a frozen
// owner's rooms go to the next node once their leases are free. An address
// leaves once a health check answers SERVING: a node cut off from Redis
// answers NOT_SERVING but no command. Close ends its goroutines (one per
// stalled address).
type stalls struct {
	check func(ctx context.Context, addr string) error // one health check: nil if SERVING
	log   *slog.Logger

	set atomic.Pointer[map[string]struct{}] // copied on write: read on every pick

	mu     sync.Mutex
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newStalls(check func(ctx context.Context, addr string) error, log *slog.Logger) *stalls {
	s := &stalls{check: check, log: log}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// stalled reports whether addr is in the set.
func (s *stalls) stalled(addr string) bool {
	if s == nil {
		return false
	}
	m := s.set.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[addr]
	return ok
}

// any reports whether the set is not empty.
func (s *stalls) any() bool {
	if s == nil {
		return false
	}
	m := s.set.Load()
	return m != nil && len(*m) > 0
}

// mark adds addr to the set and checks its health until it answers.
func (s *stalls) mark(addr string) {
	s.mu.Lock()
	if s.closed || s.stalled(addr) {
		s.mu.Unlock()
		return
	}
	s.update(func(m map[string]struct{}) { m[addr] = struct{}{} })
	s.wg.Go(func() { s.recheck(addr) })
	s.mu.Unlock()
	s.log.Warn("room backend not answering: routing around it", "addr", addr)
}

// update replaces the set by a changed copy; s.mu is held.
func (s *stalls) update(change func(map[string]struct{})) {
	m := make(map[string]struct{})
	if old := s.set.Load(); old != nil {
		maps.Copy(m, *old)
	}
	change(m)
	s.set.Store(&m)
}

// recheck checks addr's health until it answers SERVING, or stallForget
// passes, then removes it.
func (s *stalls) recheck(addr string) {
	since := time.Now()
	t := time.NewTicker(stallRecheck)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, stallCheckTimeout)
		err := s.check(ctx, addr)
		cancel()
		if err != nil && time.Since(since) < stallForget {
			continue
		}
		s.mu.Lock()
		s.update(func(m map[string]struct{}) { delete(m, addr) })
		s.mu.Unlock()
		s.log.Info("room backend no longer routed around", "addr", addr, "after_ms", time.Since(since).Milliseconds(), "last_check", errString(err))
		return
	}
}

func errString(err error) string {
	if err == nil {
		return "serving"
	}
	return err.Error()
}

// close stops the health checks and waits for them.
func (s *stalls) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// answers reports whether addr's room-service answers a health check at
// all, SERVING or not, within stallCheckTimeout: a stopped process does not.
func (b *backends) answers(addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), stallCheckTimeout)
	defer cancel()
	_, err := b.health(ctx, addr)
	return err == nil
}

// healthCheck is health's answer as an error: nil means SERVING.
func (b *backends) healthCheck(ctx context.Context, addr string) error {
	st, err := b.health(ctx, addr)
	if err == nil && st != healthpb.HealthCheckResponse_SERVING {
		err = fmt.Errorf("health %s", st)
	}
	return err
}

// health asks addr's room-service for its grpc.health.v1 status over the
// cached owner connection, the one redirected commands use.
func (b *backends) health(ctx context.Context, addr string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	var st healthpb.HealthCheckResponse_ServingStatus
	err := b.withOwner(addr, func(c *grpc.ClientConn) error {
		resp, err := healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{Service: HealthService})
		st = resp.GetStatus()
		return err
	})
	return st, err
}
