package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/drain/grpcdrain"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// roomLog is one room's log, shared by the test backends as room-service
// nodes share Redis.
type roomLog struct {
	mu      sync.Mutex
	ids     []string
	changed chan struct{}
}

func newRoomLog(ids ...string) *roomLog { return &roomLog{ids: ids, changed: make(chan struct{})} }

func (l *roomLog) add(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, id)
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *roomLog) since(after int64) ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids[min(after, int64(len(l.ids))):]...), l.changed
}

// testEvents serves WatchRoom from a roomLog, as room-service does from
// Redis, with heartbeats when asked. Frozen, it sends nothing more on its
// streams and keeps them open, as a stopped process does.
type testEvents struct {
	roompb.UnimplementedRoomEventsServer
	log     *roomLog
	watches atomic.Int64  // WatchRoom calls received
	watched chan struct{} // told of each call, when the test listens
	frozen  chan struct{}
	freeze  sync.Once
	failing atomic.Bool // answer every watch UNAVAILABLE at once, as a node whose reads of the room fail

	mu     sync.Mutex
	byRoom map[string]int // WatchRoom calls per room
}

func (e *testEvents) stop() { e.freeze.Do(func() { close(e.frozen) }) }

func (e *testEvents) WatchRoom(req *roompb.WatchRoomRequest, stream roompb.RoomEvents_WatchRoomServer) error {
	e.watches.Add(1)
	e.mu.Lock()
	if e.byRoom == nil {
		e.byRoom = map[string]int{}
	}
	e.byRoom[req.GetRoomId()]++
	e.mu.Unlock()
	select {
	case e.watched <- struct{}{}:
	default:
	}
	if e.failing.Load() {
		return status.Errorf(codes.Unavailable, "room %s: this node's reads of it have failed: watch on another node", req.GetRoomId())
	}
	ctx := stream.Context()
	select { // frozen before the call: a stopped process sends nothing, not even a first heartbeat
	case <-e.frozen:
		<-ctx.Done()
		return ctx.Err()
	default:
	}
	after := req.GetAfterSeq()
	if ids, _ := e.log.since(0); after > int64(len(ids)) {
		return status.Errorf(codes.OutOfRange, "after_seq %d: room %s is at seq %d", after, req.GetRoomId(), len(ids))
	}
	var beat <-chan time.Time
	if v := metadata.ValueFromIncomingContext(ctx, roompb.WatchHeartbeatKey); len(v) > 0 {
		period, err := roompb.ParseWatchHeartbeat(v[0])
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		t := time.NewTicker(period)
		defer t.Stop()
		beat = t.C
		if err := stream.Send(roompb.Heartbeat(req.GetRoomId(), after)); err != nil {
			return err
		}
	}
	for {
		ids, changed := e.log.since(after)
		for _, id := range ids {
			after++
			if err := stream.Send(&roompb.RoomEvent{RoomId: req.GetRoomId(), Seq: after, CommandId: id}); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-beat:
			if err := stream.Send(roompb.Heartbeat(req.GetRoomId(), after)); err != nil {
				return err
			}
		case <-e.frozen:
			<-ctx.Done()
			return ctx.Err()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// frozenHealth answers health checks until frozen, then none, as a
// stopped process does.
type frozenHealth struct {
	*health.Server
	frozen <-chan struct{}
}

func (h frozenHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	select {
	case <-h.frozen:
		<-ctx.Done()
		return nil, ctx.Err()
	default:
		return h.Server.Check(ctx, req)
	}
}

// eventsBackend is a room-service stand-in that drains as room-service
// does: server streams registered with drain.Streams, closed paced.
type eventsBackend struct {
	addr   string
	health *health.Server
	hooks  []drain.Hook
	events *testEvents
	rooms  *testRooms // GetRoom answers from the log
}

func startEventsBackend(t *testing.T, log *roomLog, serving bool) *eventsBackend {
	t.Helper()
	tr := new(drain.Tracker)
	s, err := drain.NewStreams(drain.StreamsConfig{Name: "grpc.streams", Margin: 200 * time.Millisecond})
	require.NoError(t, err)
	srv := grpc.NewServer(grpcdrain.ServerOptions(tr, s)...)
	hs := health.NewServer()
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	hs.SetServingStatus(HealthService, st)
	events := &testEvents{log: log, watched: make(chan struct{}, 1), frozen: make(chan struct{})}
	healthpb.RegisterHealthServer(srv, frozenHealth{hs, events.frozen})
	roompb.RegisterRoomEventsServer(srv, events)
	rooms := &testRooms{get: func(_ context.Context, req *roompb.GetRoomRequest) (*roompb.Room, error) {
		ids, _ := log.since(0)
		return &roompb.Room{RoomId: req.GetRoomId(), Seq: int64(len(ids)), CommandIds: ids}, nil
	}}
	roompb.RegisterRoomsServer(srv, rooms)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return &eventsBackend{addr: ln.Addr().String(), health: hs, hooks: append(grpcdrain.Hooks("grpc", srv, tr), s.Hooks()...),
		events: events, rooms: rooms}
}

// drainFor runs hooks as a drain with budget and requires it clean.
func drainFor(t *testing.T, budget time.Duration, hooks []drain.Hook) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	require.NoError(t, drain.Run(ctx, "test", hooks).Err())
}

// gatewayServer serves the events route as newServer does, with its
// drain hooks.
func gatewayServer(t *testing.T, b *backends) (string, []drain.Hook) {
	t.Helper()
	return gatewayServerKeeping(t, b, defaultFeedEvents)
}

// gatewayServerKeeping is gatewayServer with feeds that keep capacity
// events per room.
func gatewayServerKeeping(t *testing.T, b *backends, capacity int) (string, []drain.Hook) {
	t.Helper()
	ev, err := newEvents(eventsParams{Backends: b, Logger: quiet()})
	require.NoError(t, err)
	ev.feeds.capacity = capacity
	var tr drain.Tracker
	mux := http.NewServeMux()
	mux.Handle(eventsRoute, tr.Middleware(ev))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	hooks := append(drain.HTTPHooks("http", srv, &tr), ev.hooks()...) // before Serve: it wraps ConnState
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done; require.NoError(t, ev.feeds.Close(context.Background())) })
	return ln.Addr().String(), hooks
}

// sseEvent is one event or field a subscriber read.
type sseEvent struct {
	id     int64
	data   event
	retry  bool
	failed string // the data of an "event: error"
}

// subscribe follows the room's events through the gateway at addr after
// lastID; the channel closes when the response ends.
func subscribe(t *testing.T, addr string, lastID int64) <-chan sseEvent {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+addr+"/api/v1/rooms/r1/events", nil)
	require.NoError(t, err)
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	tp := &http.Transport{}
	t.Cleanup(tp.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tp}).Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		var ev sseEvent
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case line == "event: error":
				ev.failed = "?"
			case strings.HasPrefix(line, "data: ") && ev.failed != "":
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.failed)
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data)
			case strings.HasPrefix(line, "retry: "):
				ev.retry = true
			case line == "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	return out
}

// A subscriber follows a room across a room-service drain without
// noticing it, and across its gateway's drain by resuming with
// Last-Event-ID: every event once, in order.
func TestEventsResumeAcrossDrains(t *testing.T) {
	log := newRoomLog("c1", "c2", "c3")
	a := startEventsBackend(t, log, true)
	b := startEventsBackend(t, log, false) // round_robin uses a only, for now
	bs := newBackends(Config{Backends: []string{a.addr, b.addr}}, quiet())
	require.NoError(t, bs.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, bs.Close(context.Background())) })
	gw1, gw1Hooks := gatewayServer(t, bs)
	gw2, _ := gatewayServer(t, bs)

	var got []string
	last := int64(1) // the subscriber has seq 1
	next := func(sub <-chan sseEvent) bool {
		t.Helper()
		for ev := range sub {
			if ev.retry {
				continue
			}
			require.Equal(t, last+1, ev.id, "events in order, none skipped or repeated")
			assert.Equal(t, ev.id, ev.data.Seq)
			last = ev.id
			got = append(got, ev.data.CommandID)
			return true
		}
		return false
	}
	sub := subscribe(t, gw1, last)
	require.True(t, next(sub))
	require.True(t, next(sub))
	log.add("c4")
	require.True(t, next(sub))

	// room-service a drains: NOT_SERVING, then its stream closed paced.
	b.health.SetServingStatus(HealthService, healthpb.HealthCheckResponse_SERVING)
	a.health.SetServingStatus(HealthService, healthpb.HealthCheckResponse_NOT_SERVING)
	drainFor(t, 1500*time.Millisecond, a.hooks)
	log.add("c5")
	require.True(t, next(sub), "the gateway watches again on b from seq 4")

	// The gateway drains: the subscriber is told and its stream closed.
	var told bool
	drained := make(chan struct{})
	go func() { defer close(drained); drainFor(t, 1500*time.Millisecond, gw1Hooks) }()
	for ev := range sub {
		told = told || ev.retry
		require.False(t, ev.id > 0, "no event while the room is idle")
	}
	<-drained
	assert.True(t, told, "the subscriber was told to reconnect (retry:)")

	sub = subscribe(t, gw2, last) // EventSource resumes with Last-Event-ID
	log.add("c6")
	require.True(t, next(sub))
	ids, _ := log.since(1)
	assert.Equal(t, ids, got, "every event once, in the room's order")
}

func TestEventsBadRequests(t *testing.T) {
	ev, err := newEvents(eventsParams{Backends: newBackends(Config{}, quiet()), Logger: quiet()})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(eventsRoute, ev)
	tests := []struct {
		name, path, lastID, want string
	}{
		{"room id with a dot", "/api/v1/rooms/a.b/events", "", `room id "a.b"`},
		{"Last-Event-ID not a number", "/api/v1/rooms/r1/events", "x", `Last-Event-ID "x"`},
		{"Last-Event-ID negative", "/api/v1/rooms/r1/events", "-1", `Last-Event-ID "-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptestRequest(t, tt.path, tt.lastID)
			rec, got := serve(t, mux, req)
			assert.Equal(t, http.StatusBadRequest, rec.Code)
			assert.Contains(t, got["error"], tt.want)
		})
	}
}

func httptestRequest(t *testing.T, path, lastID string) *http.Request {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return req
}

func serve(t *testing.T, h http.Handler, req *http.Request) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var got map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got), "body %q", rec.Body.String())
	return rec, got
}

// A backend that stops sending on a watch while keeping it open (a
// stopped process) is noticed within watchStall of its last heartbeat, and
// the feed watches again on another: the subscriber gets the events
// acknowledged meanwhile, about a second late, not when the fault ends.
func TestFeedLeavesABackendThatStopsSending(t *testing.T) {
	log := newRoomLog("c1", "c2", "c3")
	a := startEventsBackend(t, log, true)
	b := startEventsBackend(t, log, false)
	bs := newBackends(Config{Backends: []string{a.addr, b.addr}}, quiet())
	require.NoError(t, bs.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, bs.Close(context.Background())) })
	gw, _ := gatewayServer(t, bs)

	sub := subscribe(t, gw, 3)
	<-a.events.watched
	a.events.stop()
	a.health.SetServingStatus(HealthService, healthpb.HealthCheckResponse_NOT_SERVING)
	b.health.SetServingStatus(HealthService, healthpb.HealthCheckResponse_SERVING)
	log.add("c4") // acknowledged through b
	select {
	case ev := <-sub:
		assert.Equal(t, int64(4), ev.id)
		assert.Positive(t, b.events.watches.Load(), "watched again on b")
		assert.True(t, bs.stalls.stalled(a.addr), "the silent backend is marked stalled")
	case <-time.After(5 * time.Second):
		t.Fatalf("no event 5 s after it was acknowledged: the feed still waits on the silent backend (b watched %d times)", b.events.watches.Load())
	}
}

// A backend that ends a watch (here: its reads of the room fail, while its
// health still says SERVING) is left by the watch that resumes it while
// another is ready: no room's feed goes back to it, where a new read of
// the room would fail again only after its budget.
func TestFeedResumesAWatchOnAnotherBackend(t *testing.T) {
	log := newRoomLog("c1")
	a := startEventsBackend(t, log, true)
	b := startEventsBackend(t, log, true)
	a.events.failing.Store(true)
	bs := newBackends(Config{Backends: []string{a.addr, b.addr}}, quiet())
	require.NoError(t, bs.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, bs.Close(context.Background())) })
	fs := newFeeds(bs, 16)
	t.Cleanup(func() { require.NoError(t, fs.Close(context.Background())) })

	const rooms = 20
	for i := range rooms {
		id := fmt.Sprintf("r%d", i)
		f := fs.join(id, 0)
		t.Cleanup(func() { fs.leave(id, f) })
	}
	require.Eventually(t, func() bool { return b.events.watches.Load() == rooms }, 10*time.Second, time.Millisecond,
		"every room's feed watching on b (b has %d)", b.events.watches.Load())
	a.events.mu.Lock()
	defer a.events.mu.Unlock()
	for room, n := range a.events.byRoom {
		assert.Equal(t, 1, n, "room %s: watches on the backend that ended its watch; want it left after the first", room)
	}
}

// A watch opened on a backend already frozen gets no first heartbeat: it
// is judged from its start if the backend sent heartbeats before (a
// stopped process that served), and never if it did not (a room-service
// without them, during a rolling update).
func TestFeedJudgesAWatchOpenedOnAFrozenBackendThatSentHeartbeats(t *testing.T) {
	for _, known := range []bool{true, false} {
		t.Run(fmt.Sprintf("sent heartbeats before=%v", known), func(t *testing.T) {
			a := startEventsBackend(t, newRoomLog("c1"), true)
			a.events.stop()
			bs := newBackends(Config{Backends: []string{a.addr}}, quiet())
			require.NoError(t, bs.Start(context.Background()))
			t.Cleanup(func() { require.NoError(t, bs.Close(context.Background())) })
			fs := newFeeds(bs, 16)
			if known {
				fs.heartbeats.saw(a.addr)
			}
			ctx, cancel := context.WithTimeout(context.Background(), watchStall+time.Second)
			defer cancel()
			_, _, err := fs.watch(ctx, "r1", 1, &feed{changed: make(chan struct{})}, "")
			if known {
				assert.Equal(t, codes.Unavailable, status.Code(err), "got %v; want UNAVAILABLE at watchStall", err)
				assert.True(t, bs.stalls.stalled(a.addr), "marked stalled")
				return
			}
			// The caller's deadline ended it (grpc-go's own timer for it may
			// fire before ctx's: the code, not ctx.Err, says so), not the judge.
			assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "waited on the silent backend until the caller gave up: %v", err)
			assert.False(t, bs.stalls.stalled(a.addr), "never judged")
		})
	}
}

// oldEvents is a live room-service of a version without heartbeats: it
// sends the room's events and then nothing (a quiet room).
type oldEvents struct {
	roompb.UnimplementedRoomEventsServer
}

func (oldEvents) WatchRoom(req *roompb.WatchRoomRequest, stream roompb.RoomEvents_WatchRoomServer) error {
	if req.GetAfterSeq() == 0 {
		if err := stream.Send(&roompb.RoomEvent{RoomId: req.GetRoomId(), Seq: 1, CommandId: "c1"}); err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return stream.Context().Err()
}

// A live room-service without heartbeats at an address that sent them
// before (a rollback; docker-compose's one stable address) is not taken
// for stalled: it answers the health check a stopped process would not,
// and the address is forgotten.
func TestFeedDoesNotJudgeALiveBackendWithoutHeartbeats(t *testing.T) {
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus(HealthService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	roompb.RegisterRoomEventsServer(srv, oldEvents{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	addr := ln.Addr().String()

	bs := newBackends(Config{Backends: []string{addr}}, quiet())
	require.NoError(t, bs.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, bs.Close(context.Background())) })
	fs := newFeeds(bs, 16)
	fs.heartbeats.saw(addr) // the newer version at this address beat a minute ago

	ctx, cancel := context.WithTimeout(context.Background(), 2*watchStall)
	defer cancel()
	last, _, err := fs.watch(ctx, "r1", 0, &feed{first: 1, changed: make(chan struct{})}, "")
	assert.Equal(t, int64(1), last)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "the watch lasted until the caller left: %v", err)
	assert.False(t, bs.stalls.stalled(addr), "a live backend marked stalled")
	assert.False(t, fs.heartbeats.sends(addr), "the address is forgotten")
}
