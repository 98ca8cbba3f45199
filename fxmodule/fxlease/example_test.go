package fxlease_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxlease"
	"github.com/drainkit/drainkit/lease"
)

// An HTTP service that owns rooms through leases: the client fits leases
// (one retry at most, context deadlines honoured), and lease.Config.Addr is
// the address other instances reach this one at, which Place gives them to
// forward a room's requests (nothing fills it in). roomsAPI serves the
// rooms.
func Example() {
	newRedis := func(lc fx.Lifecycle) redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1})
		lc.Append(fx.Hook{OnStop: func(context.Context) error { return rdb.Close() }})
		return rdb
	}
	os.Exit(fxmodule.Run(
		fxmodule.Module, fxmodule.FromEnv, fxlease.Module,
		fx.Provide(newRedis),
		fx.Supply(lease.Config{Addr: os.Getenv("ADVERTISE_ADDR")}), // e.g. the pod's IP and this port
		fxmodule.HTTP("api", ":8080", roomsAPI),
	))
}

// roomsAPI serves a room's requests here if this instance holds the room
// or can take it, and forwards them otherwise (another instance holds it,
// or this one drains).
func roomsAPI(leases *lease.Manager) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("room")
		l, err := leases.Acquire(r.Context(), id)
		switch {
		case errors.Is(err, lease.ErrInvalidID):
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		case errors.Is(err, lease.ErrHeld), errors.Is(err, lease.ErrDraining):
			forward(w, r, leases, id)
			return
		case err != nil:
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_ = l.Token() // pass it with every write, so storage refuses a stale owner
	})
}

// resendFor bounds how long forward resends a request: set it above the
// longest a room waits for its hand-off (the holder's wait for its
// requests in flight, then its turn among the flushes).
const resendFor = 10 * time.Second

// forward sends r where Place says (the holder, or the active instance
// that takes a room nobody holds) and copies the answer back. It resends,
// asking Place again, what was not applied: a forward refused with 503
// and Retry-After (a draining holder refuses before its handler runs) or
// one whose connection could not be made. Once the hand-off has moved the
// room, the resend reaches its next owner. Any other failure may have
// been applied and is answered 502, or 504 at the bound, never resent. A
// request that was itself forwarded here is refused, not forwarded again
// (its sender resends it), so forwards never go round in a loop. A
// redirect would hand the refusals to the client.
func forward(w http.ResponseWriter, r *http.Request, leases *lease.Manager, id string) {
	notApplied := func(msg string) { // the answer that tells the sender to try again
		w.Header().Set("Retry-After", "1")
		http.Error(w, msg, http.StatusServiceUnavailable)
	}
	if r.Header.Get(drain.ForwardedHeader) != "" {
		notApplied("room " + id + " is not here; ask again where it is")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20)) // sent again with each resend
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), resendFor)
	defer cancel()
	for {
		to, err := leases.Place(ctx, id)
		if err == nil && to.Addr != "" {
			req, _ := http.NewRequestWithContext(ctx, r.Method, "http://"+to.Addr+r.URL.RequestURI(), bytes.NewReader(body))
			req.Header = r.Header.Clone()
			req.Header.Set(drain.ForwardedHeader, "1") // it follows the room: no arrival for the holder's drain report
			resp, err := http.DefaultClient.Do(req)
			var dial *net.OpError
			switch {
			case err == nil && (resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == ""):
				defer resp.Body.Close()
				maps.Copy(w.Header(), resp.Header)
				w.WriteHeader(resp.StatusCode)
				_, _ = io.Copy(w, resp.Body)
				return
			case err == nil:
				resp.Body.Close() // refused, not applied: resend
			case errors.As(err, &dial) && dial.Op == "dial": // nothing was sent: resend
			case ctx.Err() != nil:
				http.Error(w, "no answer within "+resendFor.String()+"; it may have been applied", http.StatusGatewayTimeout)
				return
			default:
				http.Error(w, err.Error()+"; it may have been applied", http.StatusBadGateway)
				return
			}
		}
		select {
		case <-ctx.Done(): // the last attempt was not applied
			notApplied(fmt.Sprintf("room %s: no instance took it within %s", id, resendFor))
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// takeHomeRoom takes room "home" as the service starts, in an OnStart hook
// of a function that takes the *lease.Manager, so it runs after the
// Manager's own start (fx runs a constructor before what depends on it,
// and OnStart hooks in the order they were appended). A room another node
// holds is no failed start: during a rolling update that node is the
// instance this one replaces, which drains only once this one is ready;
// its requests are forwarded there until its hand-off frees the room.
func takeHomeRoom(lc fx.Lifecycle, leases *lease.Manager) {
	lc.Append(fx.Hook{OnStart: func(ctx context.Context) error {
		_, err := leases.Acquire(ctx, "home")
		if errors.Is(err, lease.ErrHeld) {
			return nil // served elsewhere for now; a request for it acquires it once free
		}
		return err
	}})
}

// A room taken as the service starts (takeHomeRoom). Acquire answers
// lease.ErrNotRunning before the Manager's start and, after the flip,
// lease.ErrDraining for a room nobody holds.
func Example_atStart() {
	newRedis := func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1})
	}
	os.Exit(fxmodule.Run(
		fxmodule.Module, fxmodule.FromEnv, fxlease.Module,
		fx.Provide(newRedis),
		fx.Invoke(takeHomeRoom),
	))
}
