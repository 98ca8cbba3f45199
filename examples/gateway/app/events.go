package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
)

// eventsRoute is the Server-Sent Events route of a room.
const eventsRoute = "GET /api/v1/rooms/{id}/events"

// rewatchBackoff is the wait, jittered ±50%, before watching again on
// another backend after one ended its stream (it is draining).
const rewatchBackoff = 100 * time.Millisecond

// closeAtDeadline is the close rate of SSE_MAX_CLOSE_RATE=off: one close
// in thirty years, so no paced close ever falls due and drain.Streams
// closes every subscriber at once when only its margin is left.
const closeAtDeadline = 1e-9

// events serves a room's events as Server-Sent Events: "id: <seq>",
// "event: command", "data: {...}". A client resumes after the last event
// it received with the Last-Event-ID header, as EventSource does on its
// own when a connection ends. The gateway follows the room over
// room-service's RoomEvents.WatchRoom, which any backend answers from
// Redis, one watch per room for all its subscribers here (feeds): when a
// backend drains and ends the watch, the gateway watches again on another
// from the last seq it received, and its clients see nothing of it. When
// the gateway itself drains, each subscriber is told (a
// retry: field) and its stream closed paced, by drain.Streams.
type events struct {
	feeds   *feeds
	streams *drain.Streams
	log     *slog.Logger
}

type eventsParams struct {
	fx.In
	Backends   *backends
	Config     Config `optional:"true"`
	Logger     *slog.Logger
	Registerer prometheus.Registerer `optional:"true"`
}

func newEvents(p eventsParams) (*events, error) {
	rate := p.Config.SSEMaxCloseRate
	if p.Config.SSECloseAtDeadline {
		rate = closeAtDeadline
	}
	s, err := drain.NewStreams(drain.StreamsConfig{Name: "sse", MaxCloseRate: rate, Registerer: p.Registerer})
	if err != nil {
		return nil, err
	}
	return &events{feeds: newFeeds(p.Backends, defaultFeedEvents), streams: s, log: p.Logger}, nil
}

// hooks drain the subscribers (drain.Streams) and, in the Close phase,
// once they have ended, stop the feeds.
func (e *events) hooks() []drain.Hook {
	return append(e.streams.Hooks(), drain.Hook{Name: "sse.feeds", Phase: drain.Close, Run: e.feeds.Close})
}

// event is the data of one SSE event.
type event struct {
	RoomID    string `json:"room_id"`
	Seq       int64  `json:"seq"`
	CommandID string `json:"command_id"`
}

// lastEventID reads the Last-Event-ID header's value: the seq of the last
// event received, 0 when absent. An error names the header and the value.
func lastEventID(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("Last-Event-ID %s: want a seq received before (a non-negative integer)", quote(v))
	}
	return n, nil
}

func (e *events) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := roomID(w, r)
	if !ok {
		return
	}
	after, err := lastEventID(r.Header.Get("Last-Event-ID"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
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

// follow relays the room's events after seq after, from the room's feed
// shared with the gateway's other subscribers, until the stream is closed
// (ctx, the stream's context, ends) or its position is refused.
func (e *events) follow(ctx context.Context, id string, after int64, w http.ResponseWriter, rc *http.ResponseController) error {
	told := e.streams.Told()
	send := func(frames [][]byte) error {
		for _, fr := range frames {
			if _, err := w.Write(fr); err != nil {
				return err
			}
		}
		after += int64(len(frames))
		if len(frames) == 0 {
			return nil
		}
		return rc.Flush()
	}
	f := e.feeds.join(id, after)
	defer func() { e.feeds.leave(id, f) }()
	checked := false // a position ahead of the feed was checked against the log
	for {
		frames, behind, changed, ferr := f.since(after)
		if behind || (!checked && after > f.head()) {
			// Behind the feed's buffer, or ahead of a feed that is itself
			// catching up: read what is missing from the room's log.
			checked = true
			log, err := e.feeds.readLog(ctx, id)
			if err != nil {
				return err
			}
			if after > int64(len(log)) {
				return errPastEnd(id, after, len(log))
			}
			frames := make([][]byte, 0, int64(len(log))-after)
			for i := after; i < int64(len(log)); i++ {
				frames = append(frames, frame(id, i+1, log[i]))
			}
			if err := send(frames); err != nil {
				return err
			}
			continue
		}
		if err := send(frames); err != nil {
			return err
		}
		if ferr != nil {
			if after >= f.start { // past the room's end, as the feed's start was
				return ferr
			}
			e.feeds.leave(id, f) // another subscriber's position failed it
			f = e.feeds.join(id, after)
			continue
		}
		select {
		case <-ctx.Done():
			return nil // closed by the drain or left by the client
		case <-told:
			// This gateway is leaving: reconnect in about a second (the
			// close itself comes paced, before the drain deadline).
			told = nil
			fmt.Fprintf(w, "retry: %d\n\n", 500+rand.IntN(1000))
			_ = rc.Flush()
		case <-changed:
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
