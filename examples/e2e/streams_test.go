package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drainkit/drainkit/examples/internal/e2e"
)

// subscriber follows one room's events through the balancer as a browser's
// EventSource does: when a response ends it reconnects, with
// Last-Event-ID, after a short jittered wait.
type subscriber struct {
	room     string
	progress chan struct{} // has a value after each event received

	mu         sync.Mutex
	got        []string // command ids, one per seq from 1
	reconnects int
	problem    string // the first event out of order, skipped or repeated
}

func (s *subscriber) run(ctx context.Context, url string) {
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for ctx.Err() == nil {
		s.follow(ctx, client, url)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.reconnects++
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(100+rand.IntN(200)) * time.Millisecond):
		}
	}
}

// follow reads one response to its end.
func (s *subscriber) follow(ctx context.Context, client *http.Client, url string) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/api/v1/rooms/"+s.room+"/events", nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	if n := len(s.got); n > 0 {
		req.Header.Set("Last-Event-ID", strconv.Itoa(n))
	}
	s.mu.Unlock()
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK { // a draining gateway's 503: try again
		_, _ = io.Copy(io.Discard, resp.Body)
		return
	}
	var id int64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
		case strings.HasPrefix(line, "data: ") && id > 0:
			var ev struct {
				CommandID string `json:"command_id"`
			}
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev)
			s.mu.Lock()
			if want := int64(len(s.got)) + 1; id != want && s.problem == "" {
				s.problem = fmt.Sprintf("room %s: event %d after %d", s.room, id, want-1)
			}
			if id == int64(len(s.got))+1 {
				s.got = append(s.got, ev.CommandID)
			}
			s.mu.Unlock()
			select {
			case s.progress <- struct{}{}:
			default:
			}
			id = 0
		}
	}
}

func (s *subscriber) seen() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got), s.problem
}

// Subscribers follow every room through HAProxy while room-service and
// then the gateway are replaced under the command load: each receives
// every event of its room once and in order, as the room's log has them.
func TestSubscribersFollowRollingUpdates(t *testing.T) {
	const perRoom = 1 // see WatchRoom: each subscriber costs its room-service ten room reads a second
	c, _ := startCluster(t, e2e.Config{})
	prefix := strings.ReplaceAll(t.Name(), "/", "_") + "-"
	ctx, cancel := context.WithCancel(context.Background())
	var (
		subs []*subscriber
		wg   sync.WaitGroup
	)
	defer func() { cancel(); wg.Wait() }()
	for i := range e2e.DefaultLoadRooms {
		for range perRoom {
			s := &subscriber{room: fmt.Sprintf("%sroom-%02d", prefix, i), progress: make(chan struct{}, 1)}
			subs = append(subs, s)
			wg.Go(func() { s.run(ctx, c.URL()) })
		}
	}

	res, drained, w := rollUnderLoad(t, c, rollBound(e2e.DefaultRooms, e2e.DefaultGateways), func(ctx context.Context) ([]e2e.Drained, error) {
		rooms, err := c.RollRooms(ctx)
		if err != nil {
			return rooms, err
		}
		gws, err := c.RollGateways(ctx)
		return append(rooms, gws...), err
	})
	check(t, c, res, drained, w)
	requireCleanRoll(t, drained, e2e.DefaultRooms+e2e.DefaultGateways, e2e.DefaultDrainTimeout+e2e.DefaultRequestTimeout) // the gateways' budget, the longer

	// Once the subscribers have caught up with each room's log, compare.
	wctx, wcancel := context.WithTimeout(context.Background(), bound)
	defer wcancel()
	client := &http.Client{Timeout: 10 * time.Second}
	logs := map[string][]string{}
	for _, s := range subs {
		want, ok := logs[s.room]
		if !ok {
			var room struct {
				CommandIDs []string `json:"command_ids"`
			}
			resp, err := client.Get(c.URL() + "/api/v1/rooms/" + s.room)
			if err != nil {
				t.Fatal(err)
			}
			err = json.NewDecoder(resp.Body).Decode(&room)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			want, logs[s.room] = room.CommandIDs, room.CommandIDs
		}
		for {
			n, problem := s.seen()
			if problem != "" {
				t.Error(problem)
				break
			}
			if n >= len(want) {
				break
			}
			select {
			case <-wctx.Done():
				t.Fatalf("room %s: a subscriber has %d of %d events after %s", s.room, n, len(want), bound)
			case <-s.progress:
			}
		}
		s.mu.Lock()
		got := append([]string(nil), s.got[:len(want)]...)
		s.mu.Unlock()
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("room %s: event %d is %s; want %s (the room's log)", s.room, i+1, got[i], want[i])
				break
			}
		}
	}
	reconnects := 0
	for _, s := range subs {
		s.mu.Lock()
		reconnects += s.reconnects
		s.mu.Unlock()
	}
	t.Logf("%d subscribers over %d rooms; %d reconnects in all; every event once and in order", len(subs), len(logs), reconnects)
}
