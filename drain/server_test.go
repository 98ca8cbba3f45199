package drain_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
)

// startHTTP serves a handler that blocks until release is closed.
func startHTTP(t *testing.T, tr *drain.Tracker, entered chan<- struct{}, release <-chan struct{}) (map[drain.Phase]drain.Hook, string, chan error) {
	t.Helper()
	hooks, url, served, _ := startHTTPServer(t, tr, entered, release)
	return hooks, url, served
}

// startHTTPServer is startHTTP that also returns the server.
func startHTTPServer(t *testing.T, tr *drain.Tracker, entered chan<- struct{}, release <-chan struct{}) (map[drain.Phase]drain.Hook, string, chan error, *http.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: tr.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "done")
	}))}
	hooks := hooksByPhase(drain.HTTPHooks("http", srv, tr)) // before Serve, as documented
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return hooks, "http://" + ln.Addr().String(), served, srv
}

// getAsync GETs url in the background and sends the request's error,
// reading the body included, when it ends.
func getAsync(url string) <-chan error {
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(url)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	return done
}

func hooksByPhase(hooks []drain.Hook) map[drain.Phase]drain.Hook {
	m := map[drain.Phase]drain.Hook{}
	for _, h := range hooks {
		m[h.Phase] = h
	}
	return m
}

func TestHTTPHooksFinishInFlightThenClose(t *testing.T) {
	tr := new(drain.Tracker)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	hooks, url, served := startHTTP(t, tr, entered, release)

	type answer struct {
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{string(b), err}
	}()
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, hooks[drain.StopIntake].Run(ctx))
	// The listener is open: a late request is answered 503 and counted,
	// not refused by the kernel where nothing could count it.
	late, err := http.Get(url)
	require.NoError(t, err, "the listener stays open after StopIntake")
	_ = late.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, late.StatusCode)
	assert.NotEmpty(t, late.Header.Get("Retry-After"))
	assert.True(t, late.Close, "Connection: close")
	_, refused, _ := tr.Arrivals()
	assert.Equal(t, uint64(1), refused, "the late request is counted")

	waited := make(chan error, 1)
	go func() { waited <- hooks[drain.WaitInFlight].Run(ctx) }()
	close(release)
	require.NoError(t, <-waited)
	a := <-got
	require.NoError(t, a.err, "in-flight request must complete")
	assert.Equal(t, "done", a.body)
	require.NoError(t, hooks[drain.Close].Run(ctx))
	assert.ErrorIs(t, <-served, http.ErrServerClosed)
	_, err = net.DialTimeout("tcp", url[len("http://"):], time.Second)
	assert.Error(t, err, "the listener is closed in phase close")
}

func TestHTTPHooksDeadlineClosesConnections(t *testing.T) {
	tr := new(drain.Tracker)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	hooks, url, served := startHTTP(t, tr, entered, release)
	clientErr := getAsync(url)
	<-entered
	require.NoError(t, hooks[drain.StopIntake].Run(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the deadline has come
	assert.ErrorIs(t, hooks[drain.WaitInFlight].Run(ctx), context.Canceled)
	assert.ErrorIs(t, hooks[drain.Close].Run(ctx), context.Canceled)
	assert.Error(t, <-clientErr, "a request still running at the deadline is cut off")
	<-served
}

// forceAfterStopIntake runs hooks in a drain that a second signal cuts
// short as StopIntake ends: WaitInFlight is skipped, so only the hooks'
// Abort can close the server.
func forceAfterStopIntake(t *testing.T, hooks map[drain.Phase]drain.Hook) *drain.Report {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signal := drain.Hook{Name: "second-signal", Phase: drain.StopIntake, Run: func(context.Context) error {
		cancel()
		return nil
	}}
	rep := drain.Run(ctx, "test", []drain.Hook{hooks[drain.StopIntake], signal, hooks[drain.WaitInFlight]})
	require.True(t, rep.Forced)
	return rep
}

// A drain forced right after StopIntake skips WaitInFlight: the server must
// still be closed, its in-flight request cut and its goroutines ended.
func TestHTTPHooksForcedAfterStopIntake(t *testing.T) {
	tr := new(drain.Tracker)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	hooks, url, served := startHTTP(t, tr, entered, release)
	clientErr := getAsync(url)
	<-entered
	rep := forceAfterStopIntake(t, hooks)
	assert.Equal(t, drain.Skipped, rep.Hooks[2].Outcome, "WaitInFlight never ran")
	assert.ErrorIs(t, <-served, http.ErrServerClosed)
	assert.Error(t, <-clientErr, "the in-flight request is cut off")
}

// The hooks take nothing from their context but its end: called outside
// drain.Run, with a context that ends as soon as StopIntake returns (a
// caller's WithTimeout and defer cancel), the in-flight request must still
// be answered, not cut off by that context's end.
func TestHTTPHooksOutsideRun(t *testing.T) {
	tr := new(drain.Tracker)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	hooks, url, served := startHTTP(t, tr, entered, release)
	clientErr := getAsync(url)
	<-entered
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, hooks[drain.StopIntake].Run(ctx))
	}()
	waited := make(chan error, 1)
	go func() { waited <- hooks[drain.WaitInFlight].Run(context.Background()) }()
	close(release)
	require.NoError(t, <-clientErr, "the in-flight request is answered")
	require.NoError(t, <-waited)
	require.NoError(t, hooks[drain.Close].Run(context.Background()))
	assert.ErrorIs(t, <-served, http.ErrServerClosed)
}

// The application may shut the server down itself, before the drain or
// while it runs, any number of times: no hook panics, and the in-flight
// request is still answered.
func TestHTTPHooksIdempotentWithAppShutdown(t *testing.T) {
	tests := []struct {
		name   string
		before bool // Shutdown before StopIntake, else between the hooks
	}{
		{"before the drain", true},
		{"during the drain", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := new(drain.Tracker)
			entered, release := make(chan struct{}, 1), make(chan struct{})
			hooks, url, served, srv := startHTTPServer(t, tr, entered, release)
			clientErr := getAsync(url)
			<-entered
			// The application's own graceful shutdown, twice, in the
			// background: it waits for the in-flight request like the drain.
			appDone := make(chan error, 2)
			appShutdown := func() {
				for range 2 {
					go func() { appDone <- srv.Shutdown(context.Background()) }()
				}
			}
			ctx := context.Background()
			if tt.before {
				appShutdown()
			}
			require.NoError(t, hooks[drain.StopIntake].Run(ctx))
			if !tt.before {
				appShutdown()
			}
			waited := make(chan error, 1)
			go func() { waited <- hooks[drain.WaitInFlight].Run(ctx) }()
			close(release)
			require.NoError(t, <-clientErr, "the in-flight request is answered")
			require.NoError(t, <-waited)
			require.NoError(t, hooks[drain.Close].Run(ctx))
			assert.ErrorIs(t, <-served, http.ErrServerClosed)
			for range 2 {
				err := <-appDone
				if err != nil {
					assert.ErrorIs(t, err, http.ErrServerClosed)
				}
			}
		})
	}
}

// A server drain put together wrong panics where it is put together,
// naming the argument, as http.Handle does for a nil handler: the hooks
// would otherwise panic at the drain, which never refused a request.
func TestHTTPHooksAndMiddlewareRefuseNothingToDrain(t *testing.T) {
	srv, tr := &http.Server{}, new(drain.Tracker)
	assert.PanicsWithValue(t, `drain: HTTPHooks: name is empty; want the server's name, such as "api"`, func() { drain.HTTPHooks("", srv, tr) })
	assert.PanicsWithValue(t, `drain: HTTPHooks("api"): srv is nil`, func() { drain.HTTPHooks("api", nil, tr) })
	assert.PanicsWithValue(t, `drain: HTTPHooks("api"): t is nil; want the manager's Tracker`, func() { drain.HTTPHooks("api", srv, nil) })
	assert.PanicsWithValue(t, "drain: Middleware: next is nil", func() { tr.Middleware(nil) })
	assert.NotPanics(t, func() { drain.HTTPHooks("api", srv, tr) })
}
