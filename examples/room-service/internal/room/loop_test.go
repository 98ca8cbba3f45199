package room

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
	"github.com/drainkit/drainkit/internal/redistest"
)

// beats is a heartbeat a test can step: Beat blocks until the test takes the
// beat (or the test ends), so each beat received marks one loop turn.
type beats struct {
	ch   chan struct{}
	done chan struct{}
}

func newBeats() *beats { return &beats{ch: make(chan struct{}), done: make(chan struct{})} }

func (b *beats) Beat() {
	select {
	case b.ch <- struct{}{}:
	case <-b.done:
	}
}

// await receives from ch, failing the test rather than hanging if the loop
// under test is stuck.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		require.FailNow(t, "timed out waiting for "+what)
		panic("unreachable")
	}
}

// runLoop runs fn until cleanup, then cancels it and waits for it.
func runLoop(t *testing.T, b *beats, fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		if b != nil {
			close(b.done)
		}
		assert.NoError(t, <-errc, "loop returned")
	})
}

func TestServiceRunSnapshotsChangedRooms(t *testing.T) {
	rdb := startRedis(t)
	a := newNode(t, rdb, "a", nil)
	b := newBeats()
	a.svc.cfg.Heartbeat, a.svc.cfg.SnapshotInterval = b, time.Millisecond
	runLoop(t, b, a.svc.Run)

	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	mustApply(t, a.svc, "r1", "c2", roompb.ApplyResponse_APPLIED)
	// Beat, then a turn that started after the commands, then beat.
	await(t, b.ch, "beat")
	await(t, b.ch, "beat after a snapshot turn")
	require.Equal(t, int64(2), getRoom(t, a.svc, "r1").GetSnapshotSeq(), "snapshot_seq after a loop turn")
	require.Zero(t, rdb.XLen(context.Background(), logKey("r1")).Val(), "log entries after a loop turn")
}

// xaddGate counts XADDs sent in pipelines and holds the first such
// pipeline until release is closed, so a test can act mid-batch.
type xaddGate struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
	xadds   atomic.Int64
}

func newXaddGate() *xaddGate {
	return &xaddGate{started: make(chan struct{}), release: make(chan struct{})}
}

func (g *xaddGate) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (g *xaddGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g *xaddGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if c.Name() == "xadd" {
				n++
			}
		}
		if n > 0 {
			g.xadds.Add(int64(n))
			g.once.Do(func() {
				close(g.started)
				<-g.release
			})
		}
		return next(ctx, cmds)
	}
}

// newOutboxNode returns a node whose commands feed an outbox that uses its
// own client, watched by gate.
func newOutboxNode(t *testing.T, gate *xaddGate, hb Heartbeat) (node, *Outbox, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	obClient := srv.Client()
	obClient.AddHook(gate)
	ob, err := NewOutbox(obClient, OutboxConfig{Interval: time.Millisecond, Heartbeat: hb, Logger: quiet})
	require.NoError(t, err, "NewOutbox")
	return newNode(t, rdb, "a", ob), ob, rdb
}

// publishedIDs returns the event_id of every event in the stream, in order.
func publishedIDs(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), DefaultEventStream, "-", "+").Result()
	require.NoError(t, err, "XRANGE %s", DefaultEventStream)
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.Values["event_id"].(string))
	}
	return ids
}

func TestOutboxPublishesWithEventIDs(t *testing.T) {
	gate := newXaddGate()
	close(gate.release)
	b := newBeats()
	a, ob, rdb := newOutboxNode(t, gate, b)
	runLoop(t, b, ob.Run)

	want := []string{"c1", "c2", "c3"}
	for _, cmd := range want {
		mustApply(t, a.svc, "r1", cmd, roompb.ApplyResponse_APPLIED)
	}
	await(t, b.ch, "beat")
	await(t, b.ch, "beat after a publishing turn")
	require.Equal(t, want, publishedIDs(t, rdb), "event ids in %s", DefaultEventStream)
	require.Zero(t, rdb.LLen(context.Background(), outboxKey("r1")).Val(), "events in the outbox after publishing")
}

func TestOutboxPauseWaitsForBatch(t *testing.T) {
	gate := newXaddGate()
	a, ob, rdb := newOutboxNode(t, gate, nil)
	waiting := make(chan struct{})
	ob.waitHook = func() { close(waiting) }
	for _, cmd := range []string{"c1", "c2", "c3"} {
		mustApply(t, a.svc, "r1", cmd, roompb.ApplyResponse_APPLIED)
	}
	runLoop(t, nil, ob.Run)

	await(t, gate.started, "a batch to start")
	paused := make(chan error, 1)
	go func() { paused <- ob.Pause(context.Background()) }()
	await(t, waiting, "Pause to wait for the batch")
	close(gate.release)
	require.NoError(t, await(t, paused, "Pause to return"), "Pause")
	// Pause returned: the whole batch, including its ack, is done.
	ctx := context.Background()
	require.Equal(t, int64(3), rdb.XLen(ctx, DefaultEventStream).Val(), "events published when Pause returned")
	require.Zero(t, rdb.LLen(ctx, outboxKey("r1")).Val(), "events in the outbox when Pause returned")
}

func TestOutboxPauseHonoursContext(t *testing.T) {
	gate := newXaddGate()
	a, ob, _ := newOutboxNode(t, gate, nil)
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	runLoop(t, nil, ob.Run)
	await(t, gate.started, "a batch to start")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Error(t, ob.Pause(ctx), "Pause with a done context mid-batch")
	close(gate.release) // let the batch end so Run can stop
}

func TestOutboxStartsNoBatchAfterStopFetching(t *testing.T) {
	gate := newXaddGate()
	close(gate.release)
	b := newBeats()
	a, ob, rdb := newOutboxNode(t, gate, b)
	runLoop(t, b, ob.Run)

	ob.StopFetching()
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	for range 3 { // the loop keeps turning (and beating) while stopped
		await(t, b.ch, "beat while stopped")
	}
	require.Zero(t, gate.xadds.Load(), "XADDs after StopFetching")
	require.Equal(t, int64(1), rdb.LLen(context.Background(), outboxKey("r1")).Val(), "events in the outbox after StopFetching: want 1 left for the next owner")
	require.NoError(t, ob.Pause(context.Background()), "Pause when idle")
}

// PublishLeft publishes what the rooms pending when fetching stopped hold
// (the events of commands in flight at StopIntake): their next owners would
// publish them only when a later command brings each room back, never for
// a room that goes quiet.
func TestPublishLeftPublishesWhatTheStoppedOutboxLeft(t *testing.T) {
	gate := newXaddGate()
	close(gate.release)
	b := newBeats()
	a, ob, rdb := newOutboxNode(t, gate, b)
	runLoop(t, b, ob.Run)
	ctx := context.Background()

	ob.StopFetching()
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	mustApply(t, a.svc, "r2", "c2", roompb.ApplyResponse_APPLIED)
	require.NoError(t, ob.Pause(ctx))
	for range 3 { // turns while stopped take nothing
		await(t, b.ch, "beat while stopped")
	}
	require.Zero(t, gate.xadds.Load(), "XADDs while stopped")

	require.NoError(t, ob.PublishLeft(ctx))
	for _, id := range []string{"r1", "r2"} {
		assert.Zero(t, rdb.LLen(ctx, outboxKey(id)).Val(), "%s's outbox after PublishLeft", id)
	}
	assert.ElementsMatch(t, []string{"c1", "c2"}, publishedIDs(t, rdb))
	ob.mu.Lock()
	assert.Empty(t, ob.pending, "rooms pending after PublishLeft")
	ob.mu.Unlock()
}

// blockingBeat blocks its Beat while armed, until released, telling the
// test when it does.
type blockingBeat struct {
	armed    atomic.Bool
	blocked  chan struct{}
	released chan struct{}
	once     sync.Once
}

func (b *blockingBeat) Beat() {
	if b.armed.Load() {
		b.once.Do(func() {
			close(b.blocked)
			<-b.released
		})
	}
}

// Pause waits for the whole turn in progress, not only its batch: the
// turn's other rooms are out of the pending set until it puts them back,
// and a PublishLeft after a Pause that returned earlier would miss them.
func TestOutboxPauseWaitsForTheWholeTurn(t *testing.T) {
	gate := newXaddGate()
	hb := &blockingBeat{blocked: make(chan struct{}), released: make(chan struct{})}
	a, ob, rdb := newOutboxNode(t, gate, hb)
	mustApply(t, a.svc, "r1", "c1", roompb.ApplyResponse_APPLIED)
	mustApply(t, a.svc, "r2", "c2", roompb.ApplyResponse_APPLIED)
	runLoop(t, nil, ob.Run)
	var release sync.Once
	releaseBeat := func() { release.Do(func() { close(hb.released) }) }
	t.Cleanup(releaseBeat)                     // before runLoop's cleanup waits for the loop
	await(t, gate.started, "a batch to start") // the turn took both rooms

	ob.StopFetching()
	hb.armed.Store(true) // the beat after this batch holds the turn
	paused := make(chan error, 1)
	go func() { paused <- ob.Pause(context.Background()) }()
	close(gate.release)
	await(t, hb.blocked, "the turn to beat after its batch")
	select {
	case <-paused:
		t.Fatal("Pause returned while the turn still held a room out of the pending set")
	case <-time.After(50 * time.Millisecond): // bounded: with the turn held, Pause cannot return in any time
	}
	releaseBeat()
	require.NoError(t, await(t, paused, "Pause to return"))
	require.NoError(t, ob.PublishLeft(context.Background()))
	ctx := context.Background()
	for _, id := range []string{"r1", "r2"} {
		assert.Zero(t, rdb.LLen(ctx, outboxKey(id)).Val(), "%s's outbox after Pause and PublishLeft", id)
	}
}

func TestOutboxAckKeepsUnpublishedEvents(t *testing.T) {
	rdb := startRedis(t)
	ctx := context.Background()
	rdb.RPush(ctx, outboxKey("r1"), "e3", "e4")
	// A worker published e1..e3 while another already removed e1, e2.
	n, err := outboxAckScript.Run(ctx, rdb, []string{outboxKey("r1")}, "e1", "e2", "e3").Int()
	require.NoError(t, err, "ack script")
	left := rdb.LRange(ctx, outboxKey("r1"), 0, -1).Val()
	require.Equal(t, 1, n, "ack: events removed (%v left)", left)
	require.Equal(t, []string{"e4"}, left, "ack: events left")
}
