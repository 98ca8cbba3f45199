package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve answers room r's log with logIDs and its event stream with events
// (seq → command id), then holds the stream open until the client leaves.
func serve(t *testing.T, logIDs []string, events [][2]any) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/rooms/r00", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string][]string{"command_ids": logIDs})
	})
	mux.HandleFunc("GET /api/v1/rooms/r00/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprintf(w, "id: %d\ndata: {\"room_id\":\"r00\",\"seq\":%d,\"command_id\":\"%s\"}\n\n", e[0], e[0], e[1])
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// follow runs one subscriber of room r00 until check has reported.
func follow(t *testing.T, url string, bound time.Duration) report {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := newSubscriber("r00")
	var wg sync.WaitGroup
	wg.Go(func() { s.run(ctx, url) })
	defer func() { cancel(); wg.Wait() }()
	select {
	case <-s.connected:
	case <-time.After(10 * time.Second):
		t.Fatal("not connected")
	}
	return check(context.Background(), url, []*subscriber{s}, bound)
}

func TestCheckPassesEventsAsLogged(t *testing.T) {
	url := serve(t, []string{"a", "b"}, [][2]any{{1, "a"}, {2, "b"}})
	before := time.Now().UnixNano()
	r := follow(t, url, 10*time.Second)
	after := time.Now().UnixNano()
	assert.Empty(t, r.Problems)
	assert.Equal(t, 1, r.Subscribers)
	require.Len(t, r.Arrivals, 2, "an arrival for each command id")
	for _, id := range []string{"a", "b"} {
		assert.True(t, r.Arrivals[id] >= before && r.Arrivals[id] <= after, "arrival of %s: %d; want within the check, [%d, %d]", id, r.Arrivals[id], before, after)
	}
}

func TestCheckReportsAnEventUnlikeTheLog(t *testing.T) {
	url := serve(t, []string{"a", "b"}, [][2]any{{1, "a"}, {2, "c"}})
	r := follow(t, url, 10*time.Second)
	require.Len(t, r.Problems, 1)
	assert.Equal(t, "room r00: event 2 is c; want b (the room's log)", r.Problems[0])
}

func TestCheckReportsASkippedEvent(t *testing.T) {
	url := serve(t, []string{"a", "b", "c"}, [][2]any{{1, "a"}, {3, "c"}})
	r := follow(t, url, 10*time.Second)
	require.Len(t, r.Problems, 1)
	assert.Equal(t, "room r00: event 3 after 1", r.Problems[0])
}

func TestCheckReportsAnEventNeverReceived(t *testing.T) {
	url := serve(t, []string{"a", "b"}, [][2]any{{1, "a"}})
	r := follow(t, url, 200*time.Millisecond) // the bound is the condition here: event 2 never comes
	require.Len(t, r.Problems, 1)
	assert.Equal(t, "room r00: a subscriber has 1 of 2 events (after 200ms)", r.Problems[0])
}
