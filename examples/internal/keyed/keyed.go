package keyed

import (
	"context"
	"sync"
)

// Workers holds the values of the keys in use and runs their workers. The
// zero value is not usable; see New.
type Workers[V any] struct {
	ctx    context.Context // the workers' lifetime
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	byKey map[string]*V
	uses  map[*V]*use // by value: V must not be a zero-size type, whose values may share an address
}

// use is one value's count of users and its worker's stop.
type use struct {
	n    int
	stop context.CancelFunc
}

// New returns Workers with no key in use. It starts nothing.
func New[V any]() *Workers[V] {
	ctx, cancel := context.WithCancel(context.Background())
	return &Workers[V]{ctx: ctx, cancel: cancel, byKey: map[string]*V{}, uses: map[*V]*use{}}
}

// Join returns key's value. When the key has none it makes one with
// create and starts run with it, on a context that ends when the value's
// last user leaves or at Close; after Close the value is made but run
// never starts. The caller calls Leave once with the value returned.
func (w *Workers[V]) Join(key string, create func() *V, run func(ctx context.Context, v *V)) *V {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.byKey[key]
	if v == nil {
		ctx, stop := context.WithCancel(w.ctx)
		v = create()
		w.byKey[key] = v
		w.uses[v] = &use{stop: stop}
		if w.ctx.Err() != nil { // closed: no worker starts
			stop()
		} else {
			w.wg.Go(func() { run(ctx, v) })
		}
	}
	w.uses[v].n++
	return v
}

// Leave drops one user of v, a value Join returned for key; the last one
// stops its worker. Each Join is matched by exactly one Leave: a Leave of
// a value with no users left panics.
func (w *Workers[V]) Leave(key string, v *V) {
	w.mu.Lock()
	defer w.mu.Unlock()
	u := w.uses[v]
	if u.n--; u.n > 0 {
		return
	}
	delete(w.uses, v)
	if w.byKey[key] == v {
		delete(w.byKey, key)
	}
	u.stop()
}

// Forget makes the next Join of key make a new value, while v's users
// keep v until they leave. It does nothing when key's value is no longer
// v. A worker may call it for its own value.
func (w *Workers[V]) Forget(key string, v *V) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byKey[key] == v {
		delete(w.byKey, key)
	}
}

// Close stops every worker and waits for them, or for ctx.
func (w *Workers[V]) Close(ctx context.Context) error {
	w.mu.Lock()
	w.cancel() // under mu: no Join starts a worker once Close waits
	w.mu.Unlock()
	done := make(chan struct{})
	go func() { defer close(done); w.wg.Wait() }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
