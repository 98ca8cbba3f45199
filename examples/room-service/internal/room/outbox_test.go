package room

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/redistest"
	"github.com/drainkit/drainkit/internal/testlog"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// signalBeat beats a readiness heartbeat and then tells the test, without
// ever blocking the loop.
type signalBeat struct {
	beat  func()
	beats chan struct{}
}

func (b signalBeat) Beat() {
	b.beat()
	select {
	case b.beats <- struct{}{}:
	default:
	}
}

// A Redis that stops answering (connections open, nothing answered) must
// not stall the outbox past its heartbeat: each batch has a deadline and
// the loop beats after it, so liveness stays ok through an outage three
// times the heartbeat's budget (a restart cannot fix Redis). The rooms it
// could not publish stay pending and are published once Redis answers.
func TestOutboxStaysAliveWhileRedisHangs(t *testing.T) {
	const maxGap = time.Second
	reg, err := readiness.New(readiness.Config{Service: "room-test", NodeID: "a", Logger: quiet},
		func() lifecycle.State { return lifecycle.Running })
	require.NoError(t, err, "readiness.New")
	t.Cleanup(func() { _ = reg.Close(context.Background()) })
	beat, err := reg.Heartbeat("outbox_worker", maxGap)
	require.NoError(t, err, "Heartbeat")
	mux := http.NewServeMux()
	reg.Mount(mux)
	live := func() (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, readiness.LivePath, nil))
		return rec.Code, rec.Body.String()
	}

	srv := redistest.Start(t)
	rdb := srv.Client()
	// As the service's client: deadlines from the context, one retry.
	obClient := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = obClient.Close() })
	hb := signalBeat{beat: beat, beats: make(chan struct{}, 1)}
	ob, err := NewOutbox(obClient, OutboxConfig{
		Interval: 20 * time.Millisecond, BatchTimeout: 200 * time.Millisecond, Heartbeat: hb, Logger: quiet,
	})
	require.NoError(t, err, "NewOutbox")
	a := newNode(t, rdb, "a", ob)
	const rooms = 10 // each pending: one turn would try every one of them
	for i := range rooms {
		mustApply(t, a.svc, fmt.Sprintf("r%d", i), "c1", roompb.ApplyResponse_APPLIED)
	}

	srv.Pause()
	runLoop(t, nil, ob.Run)
	resume := sync.OnceFunc(srv.Resume)
	t.Cleanup(resume) // before the loop is stopped (cleanups run last first)
	start := time.Now()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for outage := time.After(3 * maxGap); ; {
		select {
		case <-outage:
		case <-poll.C:
			code, body := live()
			require.Equal(t, http.StatusOK, code, "liveness %s into the Redis outage (body %s)", time.Since(start).Round(time.Millisecond), body)
			continue
		}
		break
	}
	resume()

	giveUp := time.After(10 * time.Second)
	for {
		n, err := rdb.XLen(context.Background(), DefaultEventStream).Result()
		if err == nil && n == rooms {
			return
		}
		select {
		case <-hb.beats: // a batch or a turn ended
		case <-giveUp:
			require.FailNowf(t, "events published after Redis answers again", "got %d (%v); want %d", n, err, rooms)
		}
	}
}

// lrangeCount counts the LRANGEs a client sends: one per batch tried.
type lrangeCount struct{ n atomic.Int64 }

func (c *lrangeCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *lrangeCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "lrange" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *lrangeCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A failed batch ends the turn, the rooms not reached left pending for the
// next: the loop backs off instead of trying every room against a Redis
// that is down.
func TestOutboxTurnEndsAtFailedBatch(t *testing.T) {
	srv := redistest.Start(t)
	obClient := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = obClient.Close() })
	var tried lrangeCount
	obClient.AddHook(&tried)
	ob, err := NewOutbox(obClient, OutboxConfig{Logger: quiet})
	require.NoError(t, err, "NewOutbox")
	const rooms = 10
	for i := range rooms {
		ob.Notify(fmt.Sprintf("r%d", i))
	}
	srv.Kill()
	require.False(t, ob.turn(context.Background()), "turn with Redis down")
	assert.Equal(t, int64(1), tried.n.Load(), "batches tried in one turn with Redis down")
	ob.mu.Lock()
	assert.Len(t, ob.pending, rooms, "rooms pending after the turn")
	ob.mu.Unlock()
}

// A Redis outage fails every room's batch every turn: the outbox says so
// once, as a warning, and once more when a batch is published again, not
// an ERROR per room and turn that would page someone for a failover.
func TestOutboxLogsAnOutageOnce(t *testing.T) {
	srv := redistest.Start(t)
	obClient := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = obClient.Close() })
	var logs testlog.Buffer
	ob, err := NewOutbox(obClient, OutboxConfig{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.NoError(t, err, "NewOutbox")
	for i := range 3 {
		ob.Notify(fmt.Sprintf("r%d", i))
	}
	srv.Kill()
	for range 3 {
		require.False(t, ob.turn(context.Background()), "turn with Redis down")
	}
	srv.Restart()
	require.True(t, ob.turn(context.Background()), "turn with Redis back")
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, `"msg":"room outbox batch failed`), out)
	assert.Equal(t, 1, strings.Count(out, `"level":"WARN","msg":"room outbox batch failed`), out)
	assert.Equal(t, 1, strings.Count(out, `"msg":"room outbox publishing again"`), out)
}

func TestOutboxConfigValidateNamesField(t *testing.T) {
	tests := []struct {
		name string
		give OutboxConfig
		want string // "" for valid
	}{
		{"defaults", OutboxConfig{}, ""},
		{"negative interval", OutboxConfig{Interval: -time.Second}, "Interval -1s is negative"},
		{"negative batch", OutboxConfig{Batch: -1}, "Batch -1 is negative"},
		{"negative batch timeout", OutboxConfig{BatchTimeout: -time.Millisecond}, "BatchTimeout -1ms is negative"},
		{"negative stream cap", OutboxConfig{StreamMaxLen: -1}, "StreamMaxLen -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			if tt.want == "" {
				require.NoError(t, err, "Validate()")
			} else {
				require.ErrorContains(t, err, tt.want, "Validate()")
			}
		})
	}
}

// An entry that is not an event fails its own room's batch every turn, but
// ends no turn: the other rooms' events are still published.
func TestOutboxBadEventEndsNoTurn(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	ob, err := NewOutbox(rdb, OutboxConfig{Logger: quiet})
	require.NoError(t, err, "NewOutbox")
	ctx := context.Background()
	const rooms = 10
	for i := range rooms {
		id := fmt.Sprintf("r%d", i)
		entry := fmt.Sprintf(`{"room":%q,"seq":1,"command_id":"c-%s","op":"join"}`, id, id)
		if i%2 == 0 { // half the rooms: the order of a turn is random
			entry = "not json"
		}
		require.NoError(t, rdb.RPush(ctx, outboxKey(id), entry).Err(), "RPUSH %s", outboxKey(id))
		ob.Notify(id)
	}
	ob.turn(ctx)
	n, err := rdb.XLen(ctx, DefaultEventStream).Result()
	assert.NoError(t, err, "XLEN %s", DefaultEventStream)
	assert.Equal(t, int64(rooms/2), n, "events published in one turn with %d bad entries", rooms/2)
}
