package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// placeRooms is enough rooms that three nodes each get some.
const placeRooms = 30

// minuteConfig is testConfig with a TTL the test outlasts: it drives the
// renewals (tick) itself.
func minuteConfig() Config {
	cfg := testConfig()
	cfg.TTL = time.Minute
	return cfg
}

// placements returns the node Place picks for each room, the same from
// every manager.
func placements(t *testing.T, ms ...*Manager) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a call after a failover may wait for the slot map
	defer cancel()
	placed := map[string]string{}
	for i := range placeRooms {
		room := fmt.Sprintf("place-%d", i)
		for _, m := range ms {
			o, err := m.Place(ctx, room)
			require.NoError(t, err, "%s: Place(%q)", m.cfg.Node, room)
			if want, ok := placed[room]; ok {
				require.Equal(t, want, o.Node, "%s: Place(%q).Node", m.cfg.Node, room)
			}
			placed[room] = o.Node
		}
	}
	return placed
}

// testPlace: a room nobody holds is placed on the same node by every
// Manager, rooms spread over the nodes, and the node placed takes it; a
// held room is placed on its holder.
func testPlace(t *testing.T, b backend) {
	c := b.client()
	ctx := context.Background()
	ms := []*Manager{startManager(t, c, minuteConfig()), startManager(t, c, minuteConfig()), startManager(t, c, minuteConfig())}
	byNode := map[string]*Manager{}
	for _, m := range ms {
		byNode[m.cfg.Node] = m
	}
	placed := placements(t, ms...)
	count := map[string]int{}
	for _, node := range placed {
		require.Contains(t, byNode, node, "a placed node: want one of the live ones")
		count[node]++
	}
	assert.Len(t, count, len(ms), "nodes that got rooms (%v): want every one", count)

	room := "place-0"
	l, err := byNode[placed[room]].Acquire(ctx, room)
	require.NoError(t, err, "Acquire on the node placed")
	for _, m := range ms {
		o, err := m.Place(ctx, room)
		require.NoError(t, err)
		want := Owner{Node: l.m.cfg.Node, Addr: l.m.cfg.Addr, Fence: l.Token()}
		require.Equal(t, want, o, "%s: Place of a held room", m.cfg.Node)
	}
	_, err = ms[0].Place(ctx, "")
	require.ErrorIs(t, err, ErrInvalidID, "Place of an empty id")
}

// testPlaceSkipsDrainingAndEnded: a draining node gets no room nobody
// holds but keeps those it holds; a node whose session ended gets none and
// leaves the index; with no active node, Place says nobody holds the room.
func testPlaceSkipsDrainingAndEnded(t *testing.T, b backend) {
	c := b.client()
	ctx := context.Background()
	a, d, e := startManager(t, c, minuteConfig()), startManager(t, c, minuteConfig()), startManager(t, c, minuteConfig())
	before := placements(t, a, d, e)
	held := ""
	for room, node := range before {
		if node == d.cfg.Node {
			held = room
			break
		}
	}
	require.NotEmpty(t, held, "a room placed on the node that drains")
	l, err := d.Acquire(ctx, held)
	require.NoError(t, err)

	d.BeginDrain()
	require.NoError(t, d.tick(ctx), "renewal marking the session draining")
	require.NoError(t, e.Stop(ctx), "Stop: the session ends")
	o, err := a.Place(ctx, held)
	require.NoError(t, err)
	require.Equal(t, Owner{Node: d.cfg.Node, Addr: d.cfg.Addr, Fence: l.Token(), Draining: true}, o, "Place of a draining node's room")
	for room, node := range placements(t, a, d) {
		if room != held {
			require.Equal(t, a.cfg.Node, node, "Place(%q) with one node active", room)
		}
	}
	require.False(t, c.HExists(ctx, a.indexKey(), e.cfg.Node).Val(), "the stopped node in the index")

	a.BeginDrain()
	require.NoError(t, a.tick(ctx))
	_, err = d.Place(ctx, "place-free")
	require.ErrorIs(t, err, ErrNotHeld, "Place with every node draining")
	require.ErrorContains(t, err, "no node's session is alive and active")
}

// TestPlaceOfARoomWhoseHolderDiedPicksANodeThatTakesIt: once the holder's
// session is gone (a crash, its TTL out), its room is placed on a live
// node, whose Acquire takes it at once with a higher fence.
func TestPlaceOfARoomWhoseHolderDiedPicksANodeThatTakesIt(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	dead, a, b := startManager(t, c, minuteConfig()), startManager(t, c, minuteConfig()), startManager(t, c, minuteConfig())
	l, err := dead.Acquire(ctx, "orphan")
	require.NoError(t, err)
	require.NoError(t, c.Del(ctx, dead.nodeKey()).Err(), "the holder's session expiring")

	o, err := a.Place(ctx, "orphan")
	require.NoError(t, err)
	byNode := map[string]*Manager{a.cfg.Node: a, b.cfg.Node: b}
	require.Contains(t, byNode, o.Node, "Place of a dead holder's room: want a live node")
	taken, err := byNode[o.Node].Acquire(ctx, "orphan")
	require.NoError(t, err, "Acquire on the node placed")
	assert.Greater(t, taken.Token(), l.Token(), "fence of the room taken")
}

// TestIndexKeepsANodeThatStartedASessionSinceItWasRead: Place drops a node
// from the index only if it still names the epoch read with its session
// gone: a node that started a session meanwhile wrote a newer one.
func TestIndexKeepsANodeThatStartedASessionSinceItWasRead(t *testing.T) {
	c := standalone(t).client()
	ctx := context.Background()
	m, err := New(c, testConfig())
	require.NoError(t, err)
	require.NoError(t, c.HSet(ctx, m.indexKey(), "restarted", "2", "gone", "1").Err())
	n, err := nodeForgetScript.Run(ctx, c, []string{m.indexKey()}, "restarted", "1", "gone", "1").Int()
	require.NoError(t, err)
	require.Equal(t, 1, n, "nodes dropped")
	require.Equal(t, map[string]string{"restarted": "2"}, c.HGetAll(ctx, m.indexKey()).Val(), "index")
}

// TestASessionNotListedAtItsStartIsListedAtTheNextRenewal: a failed write
// to the index does not hide the node from Place for good.
func TestASessionNotListedAtItsStartIsListedAtTheNextRenewal(t *testing.T) {
	var failed atomic.Bool
	failOnce := cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if cmd.Name() == "hset" && len(cmd.Args()) > 1 && fmt.Sprint(cmd.Args()[1]) == DefaultNodePrefix+"index" && failed.CompareAndSwap(false, true) {
			return errors.New("connection reset")
		}
		return next(ctx, cmd)
	}}
	c := standalone(t).client(failOnce)
	ctx := context.Background()
	m := startManager(t, c, minuteConfig())
	require.True(t, failed.Load(), "the index written at Start")
	require.False(t, c.HExists(ctx, m.indexKey(), m.cfg.Node).Val(), "node in the index after a failed write")
	_, err := m.Place(ctx, "room")
	require.ErrorIs(t, err, ErrNotHeld, "Place with the only node unlisted")

	require.NoError(t, m.tick(ctx))
	require.Equal(t, strconv.FormatInt(m.sess.Load().epoch, 10), c.HGet(ctx, m.indexKey(), m.cfg.Node).Val(), "index after a renewal")
	o, err := m.Place(ctx, "room")
	require.NoError(t, err)
	require.Equal(t, m.cfg.Node, o.Node, "Place once listed")
}

// TestALostIndexEntryIsWrittenAgainByTheRenewer: an entry lost while its
// session lives (a failover of the index's primary, a DEL) is written
// again within listEvery TTLs; it used to stay lost until the node's next
// session, and Place found no node.
func TestALostIndexEntryIsWrittenAgainByTheRenewer(t *testing.T) {
	c := standalone(t).client()
	cfg := minuteConfig()
	m, err := New(c, cfg)
	require.NoError(t, err)
	var skew atomic.Int64 // the injected clock's lead over the wall clock
	m.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	require.NoError(t, m.Start(context.Background()))
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	ctx := context.Background()
	require.NoError(t, c.Del(ctx, m.indexKey()).Err(), "the index lost")
	require.NoError(t, m.tick(ctx))
	_, err = m.Place(ctx, "room")
	require.ErrorIs(t, err, ErrNotHeld, "Place before the entry is due again")

	skew.Store(int64(listEvery * cfg.TTL))
	m.okAt.Store(new(m.now())) // the renewals of the time skipped
	require.NoError(t, m.tick(ctx))
	o, err := m.Place(ctx, "room")
	require.NoError(t, err, "Place once the renewer listed the node again")
	assert.Equal(t, m.cfg.Node, o.Node)
}

// TestADrainingNodePlacesNoFreeRoomOnItself: before a renewal has marked
// its session draining in Redis (renewals failing), a draining node's
// Place skips itself: its own Acquire refuses the room, and a forward to
// itself would come back.
func TestADrainingNodePlacesNoFreeRoomOnItself(t *testing.T) {
	b := standalone(t)
	var failRenewals atomic.Bool
	c := b.client(cmdHook{fn: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if failRenewals.Load() && isScript(cmd, sessionRenewScript) {
			return fmt.Errorf("slow server: %w", context.DeadlineExceeded)
		}
		return next(ctx, cmd)
	}})
	m, other := startManager(t, c, minuteConfig()), startManager(t, b.client(), minuteConfig())
	failRenewals.Store(true)
	m.BeginDrain()
	ctx := context.Background()
	require.Equal(t, stateActive, c.HGet(ctx, m.nodeKey(), "state").Val(), "m's session in Redis")
	for i := range placeRooms {
		o, err := m.Place(ctx, fmt.Sprintf("place-%d", i))
		require.NoError(t, err)
		require.Equal(t, other.cfg.Node, o.Node, "Place(place-%d) on the draining node", i)
	}
}

// TestPlaceRetriedOnAnEmptyIndexReadsNoEarlierAttempt: an attempt whose
// session reads failed, then a retry that finds the index empty (pruned
// meanwhile): Place says no node is listed, not the earlier attempt's
// error.
func TestPlaceRetriedOnAnEmptyIndexReadsNoEarlierAttempt(t *testing.T) {
	b := standalone(t)
	raw := b.client()
	var failed atomic.Bool
	var index string
	c := b.client(pipelineHook{fn: func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		if len(cmds) > 0 && cmds[0].Name() == "hmget" && failed.CompareAndSwap(false, true) {
			_ = raw.Del(ctx, index).Err() // pruned by another Place meanwhile
			err := fmt.Errorf("connection reset: %w", context.DeadlineExceeded)
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}})
	m := startManager(t, c, minuteConfig())
	index = m.indexKey()
	_, err := m.Place(context.Background(), "room")
	require.True(t, failed.Load(), "the first attempt's session reads failed")
	require.ErrorIs(t, err, ErrNotHeld, "Place")
	require.NotContains(t, err.Error(), "connection reset")
}
