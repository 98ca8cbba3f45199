package keyed_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/examples/internal/keyed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counter counts a value's workers running.
type counter struct {
	mu      sync.Mutex
	running int
	started int
}

func (c *counter) run(ctx context.Context, _ *counter) {
	c.mu.Lock()
	c.running++
	c.started++
	c.mu.Unlock()
	<-ctx.Done()
	c.mu.Lock()
	c.running--
	c.mu.Unlock()
}

func (c *counter) counts() (running, started int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running, c.started
}

func join(w *keyed.Workers[counter], key string) *counter {
	return w.Join(key, func() *counter { return new(counter) }, func(ctx context.Context, c *counter) { c.run(ctx, c) })
}

func TestOneWorkerPerKeyWhileUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := keyed.New[counter]()
		a1, a2, b := join(w, "a"), join(w, "a"), join(w, "b")
		require.Same(t, a1, a2, "one value per key")
		require.NotSame(t, a1, b)
		synctest.Wait()
		running, started := a1.counts()
		assert.Equal(t, [2]int{1, 1}, [2]int{running, started}, "workers of a: running, started")

		w.Leave("a", a1)
		synctest.Wait()
		running, _ = a1.counts()
		assert.Equal(t, 1, running, "a still has a user")
		w.Leave("a", a2)
		synctest.Wait()
		running, _ = a1.counts()
		assert.Equal(t, 0, running, "a's last user left")

		again := join(w, "a")
		assert.NotSame(t, a1, again, "a key used again gets a new value")
		w.Leave("a", again)

		require.NoError(t, w.Close(context.Background()))
		running, _ = b.counts()
		assert.Equal(t, 0, running, "Close stops the workers of keys still used")
		w.Leave("b", b)

		late := join(w, "c")
		synctest.Wait()
		_, started = late.counts()
		assert.Equal(t, 0, started, "no worker starts after Close")
		w.Leave("c", late)
	})
}

// A forgotten value stays with its users; the next Join makes a new one,
// and each one's worker stops with its own last user.
func TestForget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := keyed.New[counter]()
		old := join(w, "a")
		w.Forget("a", old)
		fresh := join(w, "a")
		require.NotSame(t, old, fresh)
		w.Leave("a", old)
		synctest.Wait()
		running, _ := old.counts()
		assert.Equal(t, 0, running, "the forgotten value's worker stops with its last user")
		running, _ = fresh.counts()
		assert.Equal(t, 1, running, "the new value's worker runs on")
		assert.Same(t, fresh, join(w, "a"), "the forgotten value's last Leave keeps the new one the key's")
		w.Forget("a", old) // no longer the key's: nothing changes
		assert.Same(t, fresh, join(w, "a"), "a Forget of a value no longer the key's keeps the key's")
		for range 3 {
			w.Leave("a", fresh)
		}
		require.NoError(t, w.Close(context.Background()))
	})
}
