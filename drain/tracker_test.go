package drain_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
)

func TestTrackerWaitIsNotified(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr drain.Tracker // the zero value is ready to use
		require.True(t, tr.Begin())
		require.True(t, tr.Begin())
		done := make(chan error, 1)
		go func() { done <- tr.Wait(context.Background()) }()
		tr.End()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Wait returned with one piece of work still in flight")
		default:
		}
		tr.End()
		synctest.Wait() // no time passes: Wait is woken, not polling
		select {
		case err := <-done:
			require.NoError(t, err)
		default:
			t.Fatal("Wait did not return when the count reached zero")
		}
	})
}

func TestTrackerWaitHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr drain.Tracker // the zero value is ready to use
		require.True(t, tr.Begin())
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, tr.Wait(ctx), context.DeadlineExceeded)
		assert.Equal(t, 1, tr.InFlight())
		tr.End()
		assert.NoError(t, tr.Wait(context.Background()))
	})
}

func TestTrackerCloseIntake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr drain.Tracker // the zero value is ready to use
		assert.True(t, lastArrival(&tr).IsZero())
		require.True(t, tr.Begin())
		first := lastArrival(&tr)
		assert.False(t, first.IsZero())
		tr.CloseIntake()
		tr.CloseIntake() // idempotent
		select {
		case <-tr.IntakeClosed():
		default:
			t.Error("the intake-closed channel is open after CloseIntake")
		}
		assert.False(t, tr.Begin(), "Begin after CloseIntake must refuse")
		assert.Equal(t, 1, tr.InFlight(), "refused work must not be counted")
		tr.End()
		assert.Equal(t, 0, tr.InFlight())
	})
}

func TestMiddlewareRefusesAfterCloseIntake(t *testing.T) {
	var tr drain.Tracker // the zero value is ready to use
	called := 0
	h := tr.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called++
		assert.Equal(t, 1, tr.InFlight(), "request must be counted while it runs")
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, http.StatusOK, rec.Code)

	tr.CloseIntake()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "close", rec.Header().Get("Connection"))
	assert.Equal(t, drain.RetryAfter, rec.Header().Get("Retry-After"))
	assert.Equal(t, 1, called, "a refused request must not reach the handler")
	assert.Equal(t, 0, tr.InFlight())
}

// The intake-closed channel (grpcdrain ends untracked streams on it) is
// closed by CloseIntake whether it was asked for before or after, so work
// that watches it cannot miss the drain.
func TestIntakeClosedChannel(t *testing.T) {
	var tr drain.Tracker
	before := tr.IntakeClosed()
	select {
	case <-before:
		t.Fatal("the intake-closed channel is closed while intake is open")
	default:
	}
	tr.CloseIntake()
	<-before
	<-tr.IntakeClosed()
	tr.CloseIntake() // a second close must not close the channel again
}

// lastArrival is the last of Arrivals' results.
func lastArrival(tr *drain.Tracker) time.Time {
	_, _, last := tr.Arrivals()
	return last
}

// A forwarded request (ForwardedHeader) is tracked in flight and refused
// after CloseIntake like any other, but is no arrival: forwards follow a
// room until its hand-off, and counting them made every rollout of a node
// holding rooms advise a longer DRAIN_DELAY, which would serve none of them.
func TestForwardedRequestsAreTrackedButNoArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr drain.Tracker
		release := make(chan struct{})
		h := tr.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		forwarded := func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/rooms/1", nil)
			r.Header.Set(drain.ForwardedHeader, "1")
			return r
		}
		served := make(chan int, 1)
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, forwarded())
			served <- rec.Code
		}()
		synctest.Wait() // the forward is in its handler
		waited := make(chan error, 1)
		go func() { waited <- tr.Wait(context.Background()) }()
		synctest.Wait()
		require.Empty(t, waited, "Wait with a forward in flight: want it waiting")

		tr.CloseIntake()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, forwarded())
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "a forward after CloseIntake")
		assert.Equal(t, drain.RetryAfter, rec.Header().Get("Retry-After"))
		close(release)
		assert.Equal(t, http.StatusOK, <-served, "the forward in flight")
		require.NoError(t, <-waited)

		arrived, refused, last := tr.Arrivals()
		assert.Zero(t, arrived, "arrivals")
		assert.Zero(t, refused, "refused")
		assert.True(t, last.IsZero(), "last arrival: %v", last)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/rooms/1", nil))
		arrived, refused, _ = tr.Arrivals()
		assert.Equal(t, [2]uint64{1, 1}, [2]uint64{arrived, refused}, "arrivals and refused after a request from a balancer")
	})
}
