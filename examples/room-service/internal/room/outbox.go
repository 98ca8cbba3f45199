package room

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Outbox defaults.
const (
	// DefaultOutboxInterval is how often the outbox worker looks for events.
	DefaultOutboxInterval = 200 * time.Millisecond
	// DefaultOutboxBatch is the most events moved in one batch.
	DefaultOutboxBatch = 100
	// DefaultOutboxBatchTimeout bounds one batch's Redis calls.
	DefaultOutboxBatchTimeout = time.Second
	// DefaultEventStream is the global stream events are published to.
	DefaultEventStream = "room:events"
	// DefaultStreamMaxLen is about how many of the newest events the
	// stream keeps.
	DefaultStreamMaxLen = 100_000
)

var (
	//go:embed scripts/outbox_ack.lua
	outboxAckLua    string
	outboxAckScript = redis.NewScript(outboxAckLua)
)

// OutboxConfig configures an [Outbox].
type OutboxConfig struct {
	// Interval is how often the worker turns; zero means [DefaultOutboxInterval].
	Interval time.Duration
	// Batch is the most events moved from one room per batch; zero means
	// [DefaultOutboxBatch].
	Batch int
	// BatchTimeout bounds the Redis calls of one batch (read, publish,
	// ack), so that a Redis that does not answer cannot hold the loop past
	// its heartbeat; zero means [DefaultOutboxBatchTimeout]. The client must
	// honour context deadlines (go-redis: ContextTimeoutEnabled).
	BatchTimeout time.Duration
	// Stream is the stream events go to; empty means [DefaultEventStream].
	Stream string
	// StreamMaxLen is about how many of the newest events the stream keeps
	// (XADD MAXLEN ~: Redis trims whole stream nodes, so a little more);
	// zero means [DefaultStreamMaxLen]. Only published events are in the
	// stream, so the cap never drops an event nobody published; a consumer
	// must read within this many events.
	StreamMaxLen int64
	// Heartbeat is beaten after every batch and on every turn, also while
	// paused, so beats are at most Interval + BatchTimeout apart; nil means
	// none.
	Heartbeat Heartbeat
	// Logger receives batch failures; nil means slog.Default().
	Logger *slog.Logger
	// WaitReplicas is how many replicas must have an event before it is
	// published, as [Config.WaitReplicas] for its command: the append
	// writes the event before its WAIT, so a command whose outcome is
	// unknown must not be published as applied.
	WaitReplicas int
}

// Validate names the first field that is unusable.
func (c OutboxConfig) Validate() error {
	switch {
	case c.Interval < 0:
		return fmt.Errorf("room: outbox Interval %s is negative", c.Interval)
	case c.Batch < 0:
		return fmt.Errorf("room: outbox Batch %d is negative", c.Batch)
	case c.BatchTimeout < 0:
		return fmt.Errorf("room: outbox BatchTimeout %s is negative", c.BatchTimeout)
	case c.StreamMaxLen < 0:
		return fmt.Errorf("room: outbox StreamMaxLen %d is negative", c.StreamMaxLen)
	case c.WaitReplicas < 0:
		return fmt.Errorf("room: outbox WaitReplicas %d is negative", c.WaitReplicas)
	}
	return nil
}

// Outbox moves room events from each room's outbox list
// (room:outbox:{ID}, filled by the fenced append) to one global stream.
//
// Delivery is at least once. The room's list and the global stream live in
// different Cluster slots, so no script can move an event atomically: the
// worker XADDs a batch, then removes exactly those events from the list. A
// crash in between publishes the batch again, so every stream entry carries
// event_id = command_id for consumers to deduplicate. Each XADD caps the
// stream at about [OutboxConfig.StreamMaxLen] of the newest events; what it
// drops was published, and a room's list is emptied only by the ack.
//
// On drain, [Outbox.StopFetching] (phase StopIntake) lets no new batch
// start, and [Outbox.Pause] (phase WaitInFlight) returns once the turn in
// progress has finished. Events appended since (commands in flight) are
// published by [Outbox.PublishLeft], after the hand-off; what that misses,
// by the room's next owner, whose recovery notifies its outbox.
type Outbox struct {
	rdb redis.UniversalClient
	cfg OutboxConfig

	mu       sync.Mutex
	pending  map[string]struct{} // rooms that may have events
	stopped  bool                // no new batch may start
	busy     chan struct{}       // closed when the turn in progress ends; nil when idle
	failing  bool                // the last batch failed on Redis: logged once, not per room and turn
	waitHook func()              // tests: called when Pause starts waiting
	events   store               // reads the outbox, confirmed by WaitReplicas replicas
}

// NewOutbox returns an outbox worker over rdb. It starts nothing: call
// [Outbox.Run].
func NewOutbox(rdb redis.UniversalClient, cfg OutboxConfig) (*Outbox, error) {
	if rdb == nil {
		return nil, errors.New("room: redis client is nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultOutboxInterval
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultOutboxBatch
	}
	if cfg.BatchTimeout == 0 {
		cfg.BatchTimeout = DefaultOutboxBatchTimeout
	}
	if cfg.Stream == "" {
		cfg.Stream = DefaultEventStream
	}
	if cfg.StreamMaxLen == 0 {
		cfg.StreamMaxLen = DefaultStreamMaxLen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := checkWaitClient(rdb, cfg.WaitReplicas); err != nil {
		return nil, err
	}
	return &Outbox{rdb: rdb, cfg: cfg, pending: make(map[string]struct{}), events: store{rdb: rdb, waitReplicas: cfg.WaitReplicas}}, nil
}

// Notify marks a room as having events to publish. It never blocks.
func (o *Outbox) Notify(roomID string) {
	o.mu.Lock()
	o.pending[roomID] = struct{}{}
	o.mu.Unlock()
}

// StopFetching lets no new batch start; the batch in progress finishes.
// It is the outbox's StopIntake step and cannot be undone.
func (o *Outbox) StopFetching() {
	o.mu.Lock()
	o.stopped = true
	o.mu.Unlock()
}

// Pause stops fetching and waits until the turn in progress (if any) has
// finished, its batch and its rooms put back pending, or ctx ends. It is
// the outbox's WaitInFlight step.
func (o *Outbox) Pause(ctx context.Context) error {
	o.mu.Lock()
	o.stopped = true
	busy, hook := o.busy, o.waitHook
	o.mu.Unlock()
	if busy == nil {
		return nil
	}
	if hook != nil {
		hook()
	}
	select {
	case <-busy:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("outbox pause: turn still in progress: %w", ctx.Err())
	}
}

// Run is the worker loop: every [OutboxConfig.Interval] it publishes one
// batch per room with pending events, beating the heartbeat after each
// batch and each turn, until ctx ends. A batch that fails ends its turn,
// and the next starts a whole Interval later. It returns nil after the
// batch in progress; the caller owns the goroutine that runs it.
func (o *Outbox) Run(ctx context.Context) error {
	t := time.NewTicker(o.cfg.Interval)
	defer t.Stop()
	for {
		o.beat()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !o.turn(ctx) {
			t.Reset(o.cfg.Interval) // a tick that came during the failed batch would retry at once
		}
	}
}

func (o *Outbox) beat() {
	if o.cfg.Heartbeat != nil {
		o.cfg.Heartbeat.Beat()
	}
}

// turn runs one batch per pending room and reports whether each one
// published. The first that does not ends the turn and the rooms not
// reached stay pending: against a Redis that does not answer, the loop
// waits out one batch per turn, not one per room.
func (o *Outbox) turn(ctx context.Context) bool {
	ids, done := o.beginTurn()
	if done == nil {
		return true
	}
	defer o.endTurn(done)
	for i, id := range ids {
		ok := o.runBatch(ctx, id)
		o.beat()
		if !ok {
			o.markPending(ids[i+1:])
			return false
		}
	}
	return true
}

// beginTurn takes the pending rooms and marks a turn in progress, unless
// fetching has stopped: then the rooms stay pending, for PublishLeft, and
// done is nil.
func (o *Outbox) beginTurn() (ids []string, done chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return nil, nil
	}
	done = make(chan struct{})
	o.busy = done
	return o.takePendingLocked(), done
}

func (o *Outbox) endTurn(done chan struct{}) {
	o.mu.Lock()
	o.busy = nil
	o.mu.Unlock()
	close(done)
}

// takePendingLocked empties the pending set into ids; o.mu is held.
func (o *Outbox) takePendingLocked() []string {
	ids := make([]string, 0, len(o.pending))
	for id := range o.pending {
		ids = append(ids, id)
	}
	clear(o.pending)
	return ids
}

func (o *Outbox) markPending(ids []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		o.pending[id] = struct{}{}
	}
}

// PublishLeft publishes, once, what the rooms still pending hold (events
// of commands in flight when fetching stopped), after [Outbox.Pause]: a
// room's next owner publishes only what its recovery finds when a later
// command brings the room back, never for a quiet room. Each batch gets
// [OutboxConfig.BatchTimeout] and the first that fails on Redis ends the
// pass; the error counts the rooms left to their next owners, and names
// those with entries that are no events.
func (o *Outbox) PublishLeft(ctx context.Context) error {
	o.mu.Lock()
	ids := o.takePendingLocked()
	o.mu.Unlock()
	var bad []error
	for i, id := range ids {
		for more := true; more; {
			var err error
			bctx, cancel := context.WithTimeout(ctx, o.cfg.BatchTimeout)
			more, err = o.publish(bctx, id)
			cancel()
			switch {
			case errors.Is(err, errBadEvent): // this room's data: the pass goes on
				o.markPending([]string{id})
				bad, more = append(bad, err), false
			case err != nil:
				o.markPending(ids[i:])
				return errors.Join(append(bad, fmt.Errorf("outbox: events of %d rooms left to their next owners: %w", len(ids)-i, err))...)
			}
		}
	}
	return errors.Join(bad...)
}

// runBatch publishes one batch of a room's events within
// [OutboxConfig.BatchTimeout], unless fetching has stopped, and reports
// whether it did. A room that may have more events stays pending.
func (o *Outbox) runBatch(ctx context.Context, id string) bool {
	o.mu.Lock()
	if o.stopped {
		o.pending[id] = struct{}{}
		o.mu.Unlock()
		return false
	}
	o.mu.Unlock()

	bctx, cancel := context.WithTimeout(ctx, o.cfg.BatchTimeout)
	more, err := o.publish(bctx, id)
	cancel()

	bad := errors.Is(err, errBadEvent)
	failed := err != nil && !bad && ctx.Err() == nil
	o.mu.Lock()
	if more || err != nil {
		o.pending[id] = struct{}{}
	}
	was := o.failing
	if err == nil || failed {
		o.failing = failed
	}
	o.mu.Unlock()
	switch {
	case bad: // this room's data, every time: Redis is fine
		o.cfg.Logger.Error("room outbox batch failed", "room_id", id, "err", err)
	case failed && !was: // an outage fails every room every turn: one line, not thousands
		o.cfg.Logger.Warn("room outbox batch failed; retried every turn, logged again once a batch is published", "room_id", id, "err", err)
	case err == nil && was:
		o.cfg.Logger.Info("room outbox publishing again", "room_id", id)
	}
	// An event that cannot be decoded is that room's problem, not Redis's:
	// the turn goes on to the other rooms.
	return err == nil || errors.Is(err, errBadEvent)
}

// errBadEvent marks an outbox entry that is not an event.
var errBadEvent = errors.New("room: outbox entry is not an event")

// event is one outbox entry as the append script encodes it.
type event struct {
	Room      string `json:"room"`
	Seq       int64  `json:"seq"`
	CommandID string `json:"command_id"`
	Op        string `json:"op"`
}

// publish moves up to Batch events from the room's outbox to the stream and
// reports whether a full batch was moved (more may wait).
func (o *Outbox) publish(ctx context.Context, id string) (more bool, err error) {
	var raw []string
	if o.cfg.WaitReplicas == 0 {
		raw, err = o.rdb.LRange(ctx, outboxKey(id), 0, int64(o.cfg.Batch)-1).Result()
	} else {
		var read *redis.StringSliceCmd
		if err = o.events.confirmed(ctx, id, func(p redis.Pipeliner) { read = p.LRange(ctx, outboxKey(id), 0, int64(o.cfg.Batch)-1) }); err == nil {
			raw = read.Val()
		}
	}
	if err != nil || len(raw) == 0 {
		return false, err
	}
	_, err = o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, r := range raw {
			var e event
			if err := json.Unmarshal([]byte(r), &e); err != nil {
				return fmt.Errorf("decode outbox event %q: %w: %w", r, errBadEvent, err)
			}
			p.XAdd(ctx, &redis.XAddArgs{Stream: o.cfg.Stream, MaxLen: o.cfg.StreamMaxLen, Approx: true, Values: []any{
				"event_id", e.CommandID, "room_id", e.Room, "seq", e.Seq, "op", e.Op,
			}})
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("publish %s to %s: %w", outboxKey(id), o.cfg.Stream, err)
	}
	args := make([]any, len(raw))
	for i, r := range raw {
		args[i] = r
	}
	if err := outboxAckScript.Run(ctx, o.rdb, []string{outboxKey(id)}, args...).Err(); err != nil {
		return false, fmt.Errorf("ack %s: %w", outboxKey(id), err)
	}
	return len(raw) == o.cfg.Batch, nil
}
