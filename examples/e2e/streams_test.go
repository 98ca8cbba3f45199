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
	room      string
	progress  chan struct{} // has a value after each event received
	connected chan struct{} // closed at the first response 200
	connect   sync.Once     // closes connected

	mu         sync.Mutex
	got        []string // command ids, one per seq from 1
	reconnects int
	problem    string // the first event out of order, skipped or repeated
}

func newSubscriber(room string) *subscriber {
	return &subscriber{room: room, progress: make(chan struct{}, 1), connected: make(chan struct{})}
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
	s.connect.Do(func() { close(s.connected) })
	var id int64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
		case strings.HasPrefix(line, "data: ") && id > 0:
			// {"room_id":…,"seq":…,"command_id":"…"}: ids are [A-Za-z0-9_-],
			// so a cut reads it as a JSON decoder would, at a fraction of
			// the cost for two thousand subscribers.
			_, cmd, _ := strings.Cut(line, `"command_id":"`)
			cmd, _, _ = strings.Cut(cmd, `"`)
			s.mu.Lock()
			if want := int64(len(s.got)) + 1; id != want && s.problem == "" {
				s.problem = fmt.Sprintf("room %s: event %d after %d", s.room, id, want-1)
			}
			if id == int64(len(s.got))+1 {
				s.got = append(s.got, cmd)
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

// Subscribers, per room of the load, in the rolling-update scenario: 2,000
// in all, so each gateway holds about 1,000 when it drains.
const subscribersPerRoom = 100

// sseCloseCap is the paced gateway's SSE_MAX_CLOSE_RATE: well above its
// subscribers ÷ pacing window (about 1,000 ÷ 18 s), so the cap is not
// what forces a burst.
const sseCloseCap = 200

// naiveGateway is the gateway that closes its subscribers all at once near
// its deadline (SSE_MAX_CLOSE_RATE=off): the second of the two replaced.
const naiveGateway = "gateway-2"

// streamsDrainTimeout is the room-services' DRAIN_TIMEOUT here (the
// gateways' is it plus DefaultRequestTimeout): a room-service closes its
// gateways' watches paced over its budget, so a shorter one keeps the
// scenario shorter; the Redis-during-drain scenario drains in 4 s.
const streamsDrainTimeout = 6 * time.Second

// Subscribers follow every room through HAProxy while room-service and
// then the gateway are replaced under the command load: each receives
// every event of its room once and in order, as the room's log has them.
// Of the two gateways replaced, the first closes its subscribers paced
// (SSE_MAX_CLOSE_RATE=sseCloseCap), the second all at once near its
// deadline (off): the naive close, measured in the same run. HAProxy
// balances by least connections, so the second holds about as many
// subscribers when it drains as the first did, most of the first's having
// gone to the gateway that replaced it.
func TestSubscribersFollowRollingUpdates(t *testing.T) {
	raiseFileLimit(t, 4*subscribersPerRoom*e2e.DefaultLoadRooms)
	gwEnv := func(name string) []string {
		if name == naiveGateway {
			return []string{"SSE_MAX_CLOSE_RATE=off"}
		}
		return []string{fmt.Sprintf("SSE_MAX_CLOSE_RATE=%d", sseCloseCap)}
	}
	c, _ := startCluster(t, e2e.Config{Balance: "leastconn", GatewayEnv: gwEnv, DrainTimeout: streamsDrainTimeout})
	prefix := strings.ReplaceAll(t.Name(), "/", "_") + "-"
	ctx, cancel := context.WithCancel(context.Background())
	var (
		subs []*subscriber
		wg   sync.WaitGroup
	)
	defer func() { cancel(); wg.Wait() }()
	for i := range e2e.DefaultLoadRooms {
		for range subscribersPerRoom {
			s := newSubscriber(fmt.Sprintf("%sroom-%02d", prefix, i))
			subs = append(subs, s)
			wg.Go(func() { s.run(ctx, c.URL()) })
		}
	}
	cctx, ccancel := context.WithTimeout(ctx, bound)
	defer ccancel()
	for _, s := range subs {
		select {
		case <-s.connected:
		case <-cctx.Done():
			t.Fatalf("not every subscriber connected within %s", bound)
		}
	}
	t.Logf("%d subscribers connected; %s", len(subs), usage(c))

	gwTimeout := streamsDrainTimeout + e2e.DefaultRequestTimeout
	res, drained, w := rollUnderLoad(t, c, rollBound(e2e.DefaultRooms, e2e.DefaultGateways), func(ctx context.Context) ([]e2e.Drained, error) {
		rooms, err := c.RollRooms(ctx)
		if err != nil {
			return rooms, err
		}
		t.Logf("room-services replaced; %s", usage(c))
		gws, err := c.RollGateways(ctx)
		return append(rooms, gws...), err
	})
	t.Logf("gateways replaced; %s", usage(c))
	check(t, c, res, drained, w)
	if len(drained) != e2e.DefaultRooms+e2e.DefaultGateways {
		t.Fatalf("instances replaced: got %d; want %d", len(drained), e2e.DefaultRooms+e2e.DefaultGateways)
	}
	requireCleanRoll(t, drained[:e2e.DefaultRooms], e2e.DefaultRooms, streamsDrainTimeout)
	// The paced gateway is held to its DRAIN_TIMEOUT like every service.
	// The naive one is the baseline being measured: closing a thousand
	// streams at once, its margin before the deadline, is what it does
	// wrong, so only its drain (exit code 0: every hook in time) is
	// required; how late it exited is reported below.
	for _, d := range drained[e2e.DefaultRooms:] {
		if d.Name != naiveGateway {
			requireCleanRoll(t, []e2e.Drained{d}, 1, gwTimeout)
		} else if d.ExitCode != 0 {
			t.Errorf("%s: exit %d after %s; want 0 (its drain in time)", d.Name, d.ExitCode, d.DrainTime)
		}
	}

	compareWithLogs(t, c, subs)
	reconnects := 0
	for _, s := range subs {
		s.mu.Lock()
		reconnects += s.reconnects
		s.mu.Unlock()
	}
	t.Logf("%d subscribers over %d rooms; %d reconnects in all; every event once and in order", len(subs), e2e.DefaultLoadRooms, reconnects)

	// The closes each gateway's drain sent to the others, as the balancer
	// relayed them.
	ends := c.StreamEnds()
	for _, d := range drained[e2e.DefaultRooms:] {
		cl := closesBy(ends, d)
		paced := d.Name != naiveGateway
		how := fmt.Sprintf("paced, cap %d/s", sseCloseCap)
		if !paced {
			how = "all at the deadline"
		}
		t.Logf("%s (%s): %s; exit %d after %s by its drain report, seen by the harness after %s (DRAIN_TIMEOUT %s)",
			d.Name, how, cl, d.ExitCode, d.DrainTime.Round(time.Millisecond), d.Exited.Sub(d.Signalled).Round(time.Millisecond), gwTimeout)
		if cl.n < subscribersPerRoom*e2e.DefaultLoadRooms/4 {
			t.Errorf("%s closed %d subscribers; want about half of %d: the comparison needs both gateways loaded", d.Name, cl.n, len(subs))
		}
		if paced && cl.perSecond > sseCloseCap {
			t.Errorf("%s: peak closes in one second: got %d; want at most its cap, %d", d.Name, cl.perSecond, sseCloseCap)
		}
	}
}

// compareWithLogs waits until every subscriber has caught up with its
// room's log, read through the balancer, and compares.
func compareWithLogs(t *testing.T, c *e2e.Cluster, subs []*subscriber) {
	t.Helper()
	wctx, wcancel := context.WithTimeout(context.Background(), bound)
	defer wcancel()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
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
}
