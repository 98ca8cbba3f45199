package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// eventsRoute is the Server-Sent Events route of a room.
const eventsRoute = "GET /api/v1/rooms/{id}/events"

// rewatchBackoff is the wait, jittered ±50%, before watching again on
// another backend after one ended its stream (it is draining).
const rewatchBackoff = 100 * time.Millisecond

// events serves a room's events as Server-Sent Events: "id: <seq>",
// "event: command", "data: {...}". A client resumes after the last event
// it received with the Last-Event-ID header, as EventSource does on its
// own when a connection ends. The gateway follows the room over
// room-service's RoomEvents.WatchRoom, which any backend answers from
// Redis: when a backend drains and ends the watch, the gateway watches
// again on another from the last seq it sent, and its client sees nothing
// of it. When the gateway itself drains, each subscriber is told (a
// retry: field) and its stream closed paced, by drain.Streams.
type events struct {
	b       *backends
	streams *drain.Streams
	log     *slog.Logger
}

type eventsParams struct {
	fx.In
	Backends   *backends
	Logger     *slog.Logger
	Registerer prometheus.Registerer `optional:"true"`
}

func newEvents(p eventsParams) (*events, error) {
	s, err := drain.NewStreams(drain.StreamsConfig{Name: "sse", Registerer: p.Registerer})
	if err != nil {
		return nil, err
	}
	return &events{b: p.Backends, streams: s, log: p.Logger}, nil
}

// event is the data of one SSE event.
type event struct {
	RoomID    string `json:"room_id"`
	Seq       int64  `json:"seq"`
	CommandID string `json:"command_id"`
}

func (e *events) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !idPattern.MatchString(id) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("room id %s: want 1 to 64 characters of [A-Za-z0-9_-]", quote(id)))
		return
	}
	var after int64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Last-Event-ID %s: want a seq received before (a non-negative integer)", quote(v)))
			return
		}
		after = n
	}
	ctx, end, ok := e.streams.Open(r.Context())
	if !ok {
		w.Header().Set("Retry-After", drain.RetryAfter)
		writeError(w, http.StatusServiceUnavailable, "draining: subscribe on another instance")
		return
	}
	defer end()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	if err := e.follow(ctx, id, after, w, rc); err != nil && ctx.Err() == nil {
		fmt.Fprintf(w, "event: error\ndata: %s\n\n", jsonString(err.Error()))
		_ = rc.Flush()
	}
}

// follow relays the room's events after seq after until the stream is
// closed (ctx, the stream's context, ends) or a backend refuses the watch
// for good.
func (e *events) follow(ctx context.Context, id string, after int64, w http.ResponseWriter, rc *http.ResponseController) error {
	told := e.streams.Told()
	for {
		got, err := e.watch(ctx, id, after, func(ev *roompb.RoomEvent) error {
			data, _ := json.Marshal(event{RoomID: ev.GetRoomId(), Seq: ev.GetSeq(), CommandID: ev.GetCommandId()})
			if _, err := fmt.Fprintf(w, "id: %d\nevent: command\ndata: %s\n\n", ev.GetSeq(), data); err != nil {
				return err
			}
			return rc.Flush()
		}, &told, func() {
			// This gateway is leaving: reconnect in about a second (the
			// close itself comes paced, before the drain deadline).
			fmt.Fprintf(w, "retry: %d\n\n", 500+rand.IntN(1000))
			_ = rc.Flush()
		})
		after = got
		switch code := status.Code(err); {
		case ctx.Err() != nil:
			return nil // closed by the drain or left by the client
		case code == codes.InvalidArgument || code == codes.OutOfRange:
			return err
		case errors.Is(err, errNotStarted) || code == codes.Unavailable || code == codes.Canceled:
			// The backend drained (UNAVAILABLE with RetryInfo) or broke:
			// watch again from the last seq sent, on the next backend.
			wait := time.Duration(float64(rewatchBackoff) * (0.5 + rand.Float64()))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		default:
			return err
		}
	}
}

// watch watches the room on the balanced connection from after and calls
// send for each event, and onTold once *told is closed (then sets it nil);
// it returns the last seq sent and why the watch ended.
func (e *events) watch(ctx context.Context, id string, after int64, send func(*roompb.RoomEvent) error, told *<-chan struct{}, onTold func()) (int64, error) {
	conn := e.b.conn()
	if conn == nil {
		return after, errNotStarted
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := roompb.NewRoomEventsClient(conn).WatchRoom(wctx, &roompb.WatchRoomRequest{RoomId: id, AfterSeq: after})
	if err != nil {
		return after, err
	}
	type recv struct {
		ev  *roompb.RoomEvent
		err error
	}
	next := make(chan recv)
	done := make(chan struct{})
	defer func() { cancel(); <-done }() // the receiving goroutine is this call's
	go func() {
		defer close(done)
		for {
			ev, err := stream.Recv()
			select {
			case next <- recv{ev, err}:
			case <-wctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-*told:
			*told = nil
			onTold()
		case r := <-next:
			if r.err != nil {
				return after, r.err
			}
			if r.ev.GetSeq() != after+1 { // a backend must not skip or repeat
				return after, status.Errorf(codes.Internal, "room %s: event seq %d after %d", id, r.ev.GetSeq(), after)
			}
			if err := send(r.ev); err != nil {
				return after, err
			}
			after = r.ev.GetSeq()
		case <-ctx.Done():
			return after, ctx.Err()
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
