// Command subscribers follows rooms' event streams through a balancer as
// browsers' EventSource does, for examples/e2e's streams scenario. It is a
// process of its own, built without the race detector, so that thousands
// of streams neither spend the race detector's CPU on the harness nor
// starve the test process, whose load clients time the product.
//
//	subscribers -url URL -prefix P -rooms N -per M
//
// follows rooms P00 … P(N-1), M subscribers each. It prints "connected"
// once every subscriber has had a response 200. A line "check" on stdin
// makes it read every room's log through URL, wait until every subscriber
// has caught up with it, compare, print one JSON [report] line and exit.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// report is what a check prints.
type report struct {
	Subscribers int      `json:"subscribers"`
	Reconnects  int      `json:"reconnects"`
	Problems    []string `json:"problems"` // an event lost, repeated, out of order or unlike the log; at most maxProblems
	More        int      `json:"more"`     // problems beyond those listed
	// Arrivals is, for each command id in the rooms' logs, when the last
	// of its room's subscribers received its event (Unix nanoseconds): a
	// test compares it with when the command was acknowledged.
	Arrivals map[string]int64 `json:"arrivals"`
}

const maxProblems = 20

func main() {
	url := flag.String("url", "", "the balancer's base URL")
	prefix := flag.String("prefix", "", "room ids are prefix + 00, 01, …")
	rooms := flag.Int("rooms", 0, "how many rooms")
	per := flag.Int("per", 0, "subscribers per room")
	bound := flag.Duration("bound", 90*time.Second, "how long a check waits for subscribers to catch up")
	flag.Parse()
	if *url == "" || *rooms <= 0 || *per <= 0 {
		fmt.Fprintln(os.Stderr, "subscribers: want -url, and -rooms and -per above 0")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	var (
		subs []*subscriber
		wg   sync.WaitGroup
	)
	for i := range *rooms {
		for range *per {
			s := newSubscriber(fmt.Sprintf("%s%02d", *prefix, i))
			subs = append(subs, s)
			wg.Go(func() { s.run(ctx, *url) })
		}
	}
	for _, s := range subs {
		select {
		case <-s.connected:
		case <-ctx.Done():
			os.Exit(1)
		}
	}
	fmt.Println("connected")

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "check" {
			r := check(ctx, *url, subs, *bound)
			stop()
			wg.Wait()
			if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
				os.Exit(1)
			}
			return
		}
	}
}

// check waits until every subscriber has caught up with its room's log,
// read through url, and compares.
func check(ctx context.Context, url string, subs []*subscriber, bound time.Duration) report {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	r := report{Subscribers: len(subs), Arrivals: map[string]int64{}}
	problem := func(format string, args ...any) {
		if len(r.Problems) < maxProblems {
			r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
		} else {
			r.More++
		}
	}
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	logs := map[string][]string{}
	for _, s := range subs {
		want, ok := logs[s.room]
		if !ok {
			var err error
			if want, err = roomLog(ctx, client, url, s.room); err != nil {
				problem("room %s: its log: %v", s.room, err)
				return r
			}
			logs[s.room] = want
		}
		got, at, err := s.waitFor(ctx, len(want), bound)
		if err != nil {
			problem("%v", err)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				problem("room %s: event %d is %s; want %s (the room's log)", s.room, i+1, got[i], want[i])
				break
			}
			r.Arrivals[got[i]] = max(r.Arrivals[got[i]], at[i])
		}
	}
	for _, s := range subs {
		s.mu.Lock()
		r.Reconnects += s.reconnects
		s.mu.Unlock()
	}
	return r
}

func roomLog(ctx context.Context, client *http.Client, url, room string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/api/v1/rooms/"+room, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var body struct {
		CommandIDs []string `json:"command_ids"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	return body.CommandIDs, err
}

// subscriber follows one room's events: when a response ends it
// reconnects, with Last-Event-ID, after a short jittered wait.
type subscriber struct {
	room      string
	progress  chan struct{} // has a value after each event received
	connected chan struct{} // closed at the first response 200
	connect   sync.Once     // closes connected

	mu         sync.Mutex
	got        []string // command ids, one per seq from 1
	at         []int64  // when each of got arrived, Unix nanoseconds
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
			// the cost for thousands of subscribers.
			_, cmd, _ := strings.Cut(line, `"command_id":"`)
			cmd, _, _ = strings.Cut(cmd, `"`)
			s.mu.Lock()
			if want := int64(len(s.got)) + 1; id != want && s.problem == "" {
				s.problem = fmt.Sprintf("room %s: event %d after %d", s.room, id, want-1)
			}
			if id == int64(len(s.got))+1 {
				s.got = append(s.got, cmd)
				s.at = append(s.at, time.Now().UnixNano())
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

// waitFor waits, within ctx (bound long), until s has n events and returns
// the first n with their arrivals, or the first problem it saw.
func (s *subscriber) waitFor(ctx context.Context, n int, bound time.Duration) ([]string, []int64, error) {
	for {
		s.mu.Lock()
		have, problem := len(s.got), s.problem
		caught := have >= n
		var got []string
		var at []int64
		if caught {
			got, at = slices.Clone(s.got[:n]), slices.Clone(s.at[:n])
		}
		s.mu.Unlock()
		switch {
		case problem != "":
			return nil, nil, errors.New(problem)
		case caught:
			return got, at, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("room %s: a subscriber has %d of %d events (after %s)", s.room, have, n, bound)
		case <-s.progress:
		}
	}
}
