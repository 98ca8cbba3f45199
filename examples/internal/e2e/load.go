package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Defaults for [Load].
const (
	DefaultRate            = 100
	DefaultLoadRooms       = 20
	DefaultRequestDeadline = 20 * time.Second
)

// Load is a bounded, open-loop load: Rate commands a second for Duration
// (or until Until is closed, if sooner), spread round robin over Rooms
// rooms, each with a unique command_id sent once. It stops by itself.
//
// # Retries
//
// An attempt is retried, and counted as a retry, only when it was refused
// before anything processed it: the connection was refused (nothing was
// sent), or the answer was 503 with Retry-After, which the drain
// middleware, the gateway (room-service said UNAVAILABLE: nothing was
// written) and the balancer (no gateway took the request) send. Anything
// else without a definite answer (502, 504, a 503 without Retry-After, a
// reset or timeout after the request was written) is a failure: the
// command may or may not have been applied, and resending it would be a
// retry nobody accounts for. For the same reason every attempt opens its
// own connection (no keep-alive): net/http silently resends a request
// that failed on a reused connection in some cases, and a balancer may
// close a kept-alive connection just as a request is written on it.
type Load struct {
	// URL is the balancer's base URL. Required.
	URL string
	// Rate is commands per second; zero means [DefaultRate].
	Rate int
	// Duration is how long commands are sent. Required.
	Duration time.Duration
	// Rooms is how many rooms the commands spread over; zero means
	// [DefaultLoadRooms].
	Rooms int
	// Prefix starts every room and command id, so runs never collide.
	Prefix string
	// RequestDeadline bounds one command with its retries; zero means
	// [DefaultRequestDeadline].
	RequestDeadline time.Duration
	// Until, when not nil, ends the sending once it is closed; Duration
	// stays the upper bound. A scenario closes it when its fault or update
	// is over, so the load is sure to span it.
	Until <-chan struct{}
}

// Outcome is what became of one command.
type Outcome struct {
	Room, CommandID string
	// Acked: the command was answered applied or duplicate, at Seq.
	Acked  bool
	Status string
	Seq    int64
	// Retries are attempts refused before anything processed them
	// (connection refused, 503 with Retry-After).
	Retries int
	// Unknown: an attempt was sent and got no definite answer (a timeout
	// or reset after the request was written, a 502, a 504, a 503 without
	// Retry-After): the command may or may not have been applied. It is
	// not retried.
	Unknown bool
	// Err is the last failure, for an unacknowledged command.
	Err string
	// Attempted is when the last attempt was sent.
	Attempted time.Time
}

// LoadResult is every command's outcome, in sending order.
type LoadResult struct {
	Outcomes []Outcome
	Rooms    []string
	// Began is when the first command was sent, LastSent when the last
	// one was: a fault or update between them happened under load.
	Began, LastSent time.Time
	Elapsed         time.Duration
}

// Totals counts the outcomes.
type Totals struct {
	Sent, Acked, Retried, Retries, Failed, Unknown int
}

// Totals counts r's outcomes: Retried commands needed at least one retry
// (Retries in all); Failed ended without an acknowledgement (Unknown of
// them had no definite answer).
func (r *LoadResult) Totals() Totals {
	var t Totals
	for _, o := range r.Outcomes {
		t.Sent++
		t.Retries += o.Retries
		if o.Retries > 0 {
			t.Retried++
		}
		if o.Acked {
			t.Acked++
			continue
		}
		t.Failed++
		if o.Unknown {
			t.Unknown++
		}
	}
	return t
}

// FailureKinds counts the unacknowledged commands by their last error,
// with ids and addresses left in: a short list says what went wrong.
func (r *LoadResult) FailureKinds() map[string]int {
	kinds := map[string]int{}
	for _, o := range r.Outcomes {
		if !o.Acked {
			kinds[o.Err]++
		}
	}
	return kinds
}

// Run sends l's commands and waits for every one to end (answered, or
// given up after RequestDeadline). It returns early, with what it has,
// when ctx ends.
func (l Load) Run(ctx context.Context) *LoadResult {
	if l.Rate == 0 {
		l.Rate = DefaultRate
	}
	if l.Rooms == 0 {
		l.Rooms = DefaultLoadRooms
	}
	if l.RequestDeadline == 0 {
		l.RequestDeadline = DefaultRequestDeadline
	}
	// A fresh connection per attempt: see "Retries" on [Load].
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

	n := int(l.Duration.Seconds() * float64(l.Rate))
	res := &LoadResult{Outcomes: make([]Outcome, n)}
	for i := range l.Rooms {
		res.Rooms = append(res.Rooms, fmt.Sprintf("%sroom-%02d", l.Prefix, i))
	}
	res.Began = time.Now()
	tick := time.NewTicker(time.Second / time.Duration(l.Rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		o := &res.Outcomes[i]
		o.Room, o.CommandID = res.Rooms[i%l.Rooms], fmt.Sprintf("%scmd-%06d", l.Prefix, i)
		res.LastSent = time.Now()
		wg.Go(func() { l.send(ctx, client, o) })
		select {
		case <-ctx.Done():
			res.Outcomes = res.Outcomes[:i+1]
			i = n
		case <-l.Until: // a nil channel never fires
			res.Outcomes = res.Outcomes[:i+1]
			i = n
		case <-tick.C:
		}
	}
	wg.Wait()
	res.Elapsed = time.Since(res.Began)
	return res
}

// send delivers one command, retrying what was refused before anything
// processed it, with a short backoff.
func (l Load) send(ctx context.Context, client *http.Client, o *Outcome) {
	ctx, cancel := context.WithTimeout(ctx, l.RequestDeadline)
	defer cancel()
	body := fmt.Sprintf(`{"command_id":%q,"op":"join"}`, o.CommandID)
	url := l.URL + "/api/v1/rooms/" + o.Room + "/commands"
	for attempt := 0; ; attempt++ {
		verdict, err := l.attempt(ctx, client, url, body, o)
		switch verdict {
		case acked:
			return
		case unknown:
			o.Unknown, o.Err = true, err.Error()
			return
		case rejected:
			o.Err = err.Error()
			return
		}
		o.Err = err.Error()
		select {
		case <-ctx.Done():
			o.Err = fmt.Sprintf("gave up after %d retries: %s", o.Retries, o.Err)
			return
		case <-time.After(min(time.Duration(attempt+1)*50*time.Millisecond, 500*time.Millisecond)):
		}
		o.Retries++
	}
}

type verdict int

const (
	acked verdict = iota
	refused
	unknown
	rejected
)

func (l Load) attempt(ctx context.Context, client *http.Client, url, body string, o *Outcome) (verdict, error) {
	o.Attempted = time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return rejected, err
	}
	req.Header.Set("Content-Type", "application/json")
	// No Idempotency-Key: with it net/http may resend the POST by itself
	// after a failure on a connection the request was already written to,
	// a retry this load would not see. (Without keep-alive it would not
	// resend anyway; the header would only invite it.)
	resp, err := client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return refused, err // nothing was sent
		}
		return unknown, err // the request may have been written and processed
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		var a struct {
			Status string `json:"status"`
			Seq    int64  `json:"seq"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			return unknown, fmt.Errorf("200 with a bad body: %w", err)
		}
		o.Acked, o.Status, o.Seq = true, a.Status, a.Seq
		return acked, nil
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
		// Refused before processing: the drain middleware (intake closed),
		// the gateway (room-service said UNAVAILABLE: nothing written) or
		// the balancer (no gateway took it) answered.
		return refused, fmt.Errorf("503 %s", readErr(resp))
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return rejected, fmt.Errorf("%d %s", resp.StatusCode, readErr(resp))
	}
	// 502 and 504 (the gateway: room-service's outcome is unknown), a 503
	// without Retry-After, anything else: no definite answer.
	return unknown, fmt.Errorf("%d %s", resp.StatusCode, readErr(resp))
}

func readErr(resp *http.Response) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error == "" {
		return http.StatusText(resp.StatusCode)
	}
	return e.Error
}
