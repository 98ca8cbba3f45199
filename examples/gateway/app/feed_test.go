package app

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startFeedGateway starts one SERVING backend on log and a gateway whose
// feeds keep capacity events per room.
func startFeedGateway(t *testing.T, log *roomLog, capacity int) (*eventsBackend, string) {
	t.Helper()
	be := startEventsBackend(t, log, true)
	bs := newBackends(Config{Backends: []string{be.addr}}, quiet())
	require.NoError(t, bs.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, bs.Close(context.Background())) })
	gw, _ := gatewayServerKeeping(t, bs, capacity)
	return be, gw
}

// expect reads the next events of sub and requires seqs from..to with the
// log's command ids.
func expect(t *testing.T, sub <-chan sseEvent, log *roomLog, who string, from, to int64) {
	t.Helper()
	ids, _ := log.since(0)
	for seq := from; seq <= to; {
		ev, ok := <-sub
		require.True(t, ok, "%s: the stream ended before seq %d", who, seq)
		require.Empty(t, ev.failed, who)
		if ev.retry {
			continue
		}
		require.Equal(t, seq, ev.id, "%s: events in order, none skipped or repeated", who)
		require.Equal(t, ids[seq-1], ev.data.CommandID, "%s: seq %d", who, seq)
		seq++
	}
}

// The subscribers of one room share one upstream watch, each from its own
// position.
func TestEventsShareOneWatchPerRoom(t *testing.T) {
	const subscribers = 50
	log := newRoomLog("c1", "c2", "c3")
	be, gw := startFeedGateway(t, log, defaultFeedEvents)
	subs := make([]<-chan sseEvent, subscribers)
	for i := range subs {
		subs[i] = subscribe(t, gw, int64(i%3)) // positions 0, 1 and 2
	}
	for i, sub := range subs {
		expect(t, sub, log, fmt.Sprintf("subscriber %d", i), int64(i%3)+1, 3)
	}
	log.add("c4")
	log.add("c5")
	for i, sub := range subs {
		expect(t, sub, log, fmt.Sprintf("subscriber %d", i), 4, 5)
	}
	assert.Equal(t, int64(1), be.events.watches.Load(), "upstream WatchRoom calls for %d subscribers of one room", subscribers)
}

// A subscriber further behind than the feed keeps, or resuming from an
// older position, reads what it lacks from the room's log and goes on with
// the others: nothing lost or repeated.
func TestEventsSubscriberBehindTheFeedCatchesUp(t *testing.T) {
	log := newRoomLog()
	for i := 1; i <= 10; i++ {
		log.add(fmt.Sprintf("c%d", i))
	}
	be, gw := startFeedGateway(t, log, 2) // keeps 2 to 4 events
	first := subscribe(t, gw, 0)
	expect(t, first, log, "first", 1, 10) // it too may have fallen behind: 10 events came at once
	gets := be.rooms.gets.Load()

	late := subscribe(t, gw, 1)
	expect(t, late, log, "late", 2, 10)
	assert.Equal(t, gets+1, be.rooms.gets.Load(), "log reads: the late subscriber read it once")
	for i := 11; i <= 20; i++ {
		log.add(fmt.Sprintf("c%d", i))
	}
	expect(t, first, log, "first", 11, 20)
	expect(t, late, log, "late", 11, 20)
	assert.Equal(t, int64(1), be.events.watches.Load(), "upstream WatchRoom calls")
}

// A Last-Event-ID past the room's end is refused with an error event,
// whether it starts the room's feed or joins one, and does not disturb the
// room's other subscribers.
func TestEventsPositionPastTheEnd(t *testing.T) {
	log := newRoomLog("c1", "c2", "c3")
	_, gw := startFeedGateway(t, log, defaultFeedEvents)
	failed := func(sub <-chan sseEvent) string {
		t.Helper()
		for ev := range sub {
			if ev.failed != "" {
				return ev.failed
			}
		}
		return "(ended without an error event)"
	}
	assert.Contains(t, failed(subscribe(t, gw, 9)), "after_seq 9: room r1 is at seq 3", "starting the feed")
	ok := subscribe(t, gw, 2)
	expect(t, ok, log, "valid", 3, 3)
	assert.Contains(t, failed(subscribe(t, gw, 7)), "after_seq 7: room r1 is at seq 3", "joining the feed")
	log.add("c4")
	expect(t, ok, log, "valid", 4, 4)
}
