package lease

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitingCtx tells when a caller first waits on it (calls Done).
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// TestStopWakesAcquireWaitingForAnEarlierCleanUp: an Acquire waiting for
// the clean-up of its room's earlier lease or acquisition returns
// ErrNotRunning once Stop begins, not when the clean-up ends: a hook or a
// release may take up to a TTL, or never return.
func TestStopWakesAcquireWaitingForAnEarlierCleanUp(t *testing.T) {
	tests := []struct {
		name string
		// setup leaves the room's earlier lease or acquisition cleaning
		// up until finish, and starts an Acquire of the room, with ctx,
		// that waits for it; result returns that Acquire's error.
		setup func(t *testing.T, ctx context.Context) (m *Manager, result func() error, finish func())
	}{
		{"a lost lease whose OnLost runs", lostLeaseEnding},
		{"an acquisition releasing a lease nobody waited for", acquisitionReleasing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // ends the wait if Stop does not
			defer cancel()
			m, result, finish := tt.setup(t, ctx)
			stopped := make(chan error, 1)
			go func() { stopped <- m.Stop(context.Background()) }()
			assert.ErrorIs(t, result(), ErrNotRunning, "Acquire waiting when Stop began")
			finish()
			assert.NoError(t, <-stopped, "Stop")
		})
	}
}

// lostLeaseEnding: the room's lease was lost and its OnLost blocks on the
// renewer (so Stop waits for it too); the Acquire waits for it to end.
func lostLeaseEnding(t *testing.T, ctx context.Context) (*Manager, func() error, func()) {
	e := startEnding(t, "stop-wakes-lost")
	res, done := e.acquireAsync(ctx)
	waitFor(t, "Acquire to wait for the lost lease", func() bool { return e.waiting() || done() })
	if done() {
		require.FailNowf(t, "Acquire returned before Stop", "%v; want it waiting for the lost lease", (<-res).err)
	}
	return e.m, func() error { return (<-res).err }, e.proceed
}

// acquisitionReleasing: the room's acquisition took a lease after its only
// caller gave up and is releasing it (the release call is held); the
// Acquire waits for that release before starting its own.
func acquisitionReleasing(t *testing.T, ctx context.Context) (*Manager, func() error, func()) {
	const room = "stop-wakes-release"
	var (
		holdAcquire, holdRelease atomic.Bool
		acquireHeld, releaseHeld = make(chan struct{}), make(chan struct{})
		acquireGate, releaseGate = make(chan struct{}), make(chan struct{})
		closeReleaseGate         sync.Once
	)
	hook := cmdHook{fn: func(hctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		switch {
		case isAcquire(cmd) && holdAcquire.CompareAndSwap(true, false):
			close(acquireHeld)
			<-acquireGate
		case isScript(cmd, releaseScript) && holdRelease.CompareAndSwap(true, false):
			close(releaseHeld)
			<-releaseGate
		}
		return next(hctx, cmd)
	}}
	c := standalone(t).client(hook)
	cfg := testConfig()
	cfg.TTL = 6 * time.Second // the held calls must not time out by themselves
	m := startManager(t, c, cfg)
	finish := func() { closeReleaseGate.Do(func() { close(releaseGate) }) }
	t.Cleanup(finish) // before Stop (cleanups run last first): the release must not stay held

	holdAcquire.Store(true)
	first, giveUp := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { _, err := m.Acquire(first, room); gaveUp <- err }()
	<-acquireHeld
	giveUp()
	require.ErrorIs(t, <-gaveUp, context.Canceled, "Acquire given up")
	holdRelease.Store(true)
	close(acquireGate) // the script takes the room for nobody: the lease is released
	<-releaseHeld

	wctx := &waitingCtx{Context: ctx, waiting: make(chan struct{})}
	errc := make(chan error, 1)
	go func() { _, err := m.Acquire(wctx, room); errc <- err }()
	select {
	case <-wctx.waiting:
	case err := <-errc:
		require.FailNowf(t, "Acquire returned before Stop", "%v; want it waiting for the release", err)
	}
	return m, func() error { return <-errc }, finish
}
