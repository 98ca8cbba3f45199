package lease

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStopEndsLeasesBeforeWaitingForAcquisitions: Stop stops the renewer,
// so the session expires in Redis a TTL later whatever Stop waits for. An
// acquisition stuck on a room whose primary does not answer must not keep
// Stop from ending the other leases first: another node takes their rooms
// once the session is gone, and a holder with a live context would then
// share its room.
func TestStopEndsLeasesBeforeWaitingForAcquisitions(t *testing.T) {
	b := standalone(t)
	stuck := make(chan struct{})
	var once sync.Once
	unanswered := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		for _, a := range cmd.Args() {
			if s, ok := a.(string); ok && strings.HasSuffix(s, "{stuck}") {
				once.Do(func() { close(stuck) })
				<-ctx.Done() // the room's primary does not answer
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}}
	a := startManager(t, b.client(unanswered), testConfig())
	other := startManager(t, b.client(), testConfig())
	ctx := context.Background()
	held, err := a.Acquire(ctx, "x")
	require.NoError(t, err, "Acquire x")
	acquired := make(chan struct{})
	go func() { defer close(acquired); _, _ = a.Acquire(ctx, "stuck") }()
	<-stuck // the acquisition of the unanswered room has begun

	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		stopped <- a.Stop(sctx)
	}()
	raw := b.client()
	waitFor(t, "the stopped node's session to leave Redis", func() bool { return raw.Exists(ctx, a.nodeKey()).Val() == 0 })
	taken, err := other.Acquire(ctx, "x")
	require.NoError(t, err, "another node's Acquire of x once the session is gone")
	assert.Greater(t, taken.Token(), held.Token(), "the new holder's fence")
	assert.ErrorIs(t, context.Cause(held.Context()), ErrReleased, "the stopped node's lease of x while another node holds x")
	<-stopped
	<-acquired
}
