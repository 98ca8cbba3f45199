package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/drainkit/drainkit/internal/harness"
)

// Defaults for [Load].
const (
	DefaultRate            = 100
	DefaultLoadRooms       = 20
	DefaultRequestDeadline = 20 * time.Second
)

// Load is a bounded, open-loop load ([harness.OpenLoop]): Rate commands a
// second for Duration (or until Until is closed, if sooner), spread round
// robin over Rooms rooms, each with a unique command_id sent once.
//
// # No retries
//
// A load client never retries: it sends each command once and records
// the answer, as a client that trusts the service's promise would. Any
// answer but 200 is a failure, a 503 with Retry-After (nothing applied) as
// much as a 502, 504, a reset or a timeout (outcome unknown): the gateway
// is meant to wait faults out within the request's deadline, so a
// failure here is one it did not. For the same reason every request opens
// its own connection ([harness.NewClient]): net/http silently resends a
// request that failed on a reused connection in some cases, and a
// balancer may close a kept-alive connection just as a request is
// written on it. The
// balancer's own retries (a connection that failed before the request was
// sent) are counted by the cluster.
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
	// RequestDeadline bounds one command; zero means
	// [DefaultRequestDeadline]. It is sent as the Request-Timeout header
	// too, so the gateway answers within it.
	RequestDeadline time.Duration
	// Until, when not nil, ends the sending once it is closed; Duration
	// stays the upper bound. A scenario closes it when its fault or update
	// is over, so the load is sure to span it.
	Until <-chan struct{}
}

// Outcome is what became of one command.
type Outcome struct {
	Room, CommandID string
	// Acked: the command was answered applied, at Seq.
	Acked  bool
	Status string
	Seq    int64
	// Refused: the answer was 503 with Retry-After (nothing applied).
	Refused bool
	// Unknown: the command was sent and got no definite answer (a timeout
	// or reset after the request was written, a 502, a 504, a 503 without
	// Retry-After): it may or may not have been applied.
	Unknown bool
	// Err is the failure, for an unacknowledged command.
	Err string
	// Sent is when the command was sent, Answered when its answer (or
	// failure) came.
	Sent, Answered time.Time
}

// Latency is how long the command took to answer.
func (o *Outcome) Latency() time.Duration { return o.Answered.Sub(o.Sent) }

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
	Sent, Acked, Failed, Refused, Unknown int
}

// Totals counts r's outcomes: Failed ended without an acknowledgement
// (Refused of them with 503 and Retry-After, Unknown with no definite
// answer).
func (r *LoadResult) Totals() Totals {
	var t Totals
	for _, o := range r.Outcomes {
		t.Sent++
		switch {
		case o.Acked:
			t.Acked++
			continue
		case o.Refused:
			t.Refused++
		case o.Unknown:
			t.Unknown++
		}
		t.Failed++
	}
	return t
}

// Window is a span of time, such as a fault; the zero Window is all time.
type Window struct{ From, To time.Time }

// overlaps reports whether o was pending at some moment of w.
func (w Window) overlaps(o *Outcome) bool {
	if w.From.IsZero() && w.To.IsZero() {
		return true
	}
	return !o.Answered.Before(w.From) && !o.Sent.After(w.To)
}

// LatencyDuring summarises the latency of the commands pending at some
// moment of w: those the fault could delay.
func (r *LoadResult) LatencyDuring(w Window) harness.Percentiles {
	var ds []time.Duration
	for i := range r.Outcomes {
		if o := &r.Outcomes[i]; w.overlaps(o) {
			ds = append(ds, o.Latency())
		}
	}
	return harness.PercentilesOf(ds)
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
	client := harness.NewClient(nil) // a fresh connection per request: see "No retries" on [Load]
	loop := harness.OpenLoop{Rate: l.Rate, Duration: l.Duration, Until: l.Until}
	res := &LoadResult{Outcomes: make([]Outcome, loop.Max())}
	for i := range l.Rooms {
		res.Rooms = append(res.Rooms, fmt.Sprintf("%sroom-%02d", l.Prefix, i))
	}
	sent := loop.Run(ctx, func(ctx context.Context, i int) {
		o := &res.Outcomes[i]
		o.Room, o.CommandID = res.Rooms[i%l.Rooms], fmt.Sprintf("%scmd-%06d", l.Prefix, i)
		l.send(ctx, client, o)
	})
	res.Outcomes = res.Outcomes[:sent.N]
	res.Began, res.LastSent = sent.Began, sent.Last
	res.Elapsed = time.Since(res.Began)
	return res
}

// send delivers one command, once.
func (l Load) send(ctx context.Context, client *http.Client, o *Outcome) {
	ctx, cancel := context.WithTimeout(ctx, l.RequestDeadline)
	defer cancel()
	body := fmt.Sprintf(`{"command_id":%q,"op":"join"}`, o.CommandID)
	url := l.URL + "/api/v1/rooms/" + o.Room + "/commands"
	o.Sent = time.Now()
	err := l.attempt(ctx, client, url, body, o)
	o.Answered = time.Now()
	if err != nil {
		o.Err = err.Error()
	}
}

func (l Load) attempt(ctx context.Context, client *http.Client, url, body string, o *Outcome) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Request-Timeout", l.RequestDeadline.String())
	// No Idempotency-Key: with it net/http may resend the POST by itself
	// after a failure on a connection the request was already written to,
	// a retry this load would not see. (Without keep-alive it would not
	// resend anyway; the header would only invite it.)
	resp, err := client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			o.Refused = true // nothing was sent
			return err
		}
		o.Unknown = true // the request may have been written and processed
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		var a struct {
			Status string `json:"status"`
			Seq    int64  `json:"seq"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			o.Unknown = true
			return fmt.Errorf("200 with a bad body: %w", err)
		}
		o.Acked, o.Status, o.Seq = true, a.Status, a.Seq
		return nil
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
		// Refused before processing: the drain middleware (intake closed),
		// the gateway (its deadline came with nothing applied, or it shed
		// the request) or the balancer (no gateway took it) answered.
		o.Refused = true
		return fmt.Errorf("503 %s", readErr(resp))
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return fmt.Errorf("%d %s", resp.StatusCode, readErr(resp))
	}
	// 502 and 504 (the gateway: room-service's outcome is unknown), a 503
	// without Retry-After, anything else: no definite answer.
	o.Unknown = true
	return fmt.Errorf("%d %s", resp.StatusCode, readErr(resp))
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
