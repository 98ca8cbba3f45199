package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/drainkit/drainkit/internal/harness"
)

// Failure causes, as the verdict counts them (JSON keys; the table
// writes them with spaces).
const (
	causeRefused = "connection_refused"
	causeReset   = "reset"
	causeTimeout = "timeout"
	cause5xx     = "5xx"
	causeOther   = "other"
)

// httpCauses are the causes of a failed HTTP request, in the order the
// verdict lists them.
var httpCauses = []string{causeRefused, causeReset, causeTimeout, cause5xx, causeOther}

// outcome is what became of one request.
type outcome struct {
	sent, answered time.Time
	status         int    // the HTTP status code, 0 without one
	code           string // the gRPC status code of a failed call
	cause          string // empty for a success
	err            string // the failure, for an example
}

// caller is how the load sends through the balancer.
type caller interface {
	// call makes one request of the load and says what became of it: o's
	// status, code, cause and err.
	call(ctx context.Context, i int, o *outcome)
	// retries is how many requests the client retried on its own: 0 for
	// HTTP; for gRPC, grpc-go's transparent retries, which nothing turns off.
	retries() int
	// close releases what the caller opened itself (not the balancer's).
	close()
}

// load is the drill's open-loop load: one request shape, never retried.
type load struct {
	cfg    *drillConfig
	caller caller

	outcomes []outcome // by request number
	sent     atomic.Int64
	ok       atomic.Int64
	failed   atomic.Int64
}

func newLoad(cfg *drillConfig, c caller, bound time.Duration) *load {
	return &load{cfg: cfg, caller: c, outcomes: make([]outcome, harness.OpenLoop{Rate: cfg.Rate, Duration: bound}.Max())}
}

// run sends until bound passed or until is closed, and waits for every
// request to end.
func (l *load) run(ctx context.Context, bound time.Duration, until <-chan struct{}) ([]outcome, harness.Sent) {
	s := harness.OpenLoop{Rate: l.cfg.Rate, Duration: bound, Until: until}.Run(ctx, l.send)
	return l.outcomes[:s.N], s
}

// send makes request i, once.
func (l *load) send(ctx context.Context, i int) {
	o := &l.outcomes[i]
	l.sent.Add(1)
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	o.sent = time.Now()
	l.caller.call(ctx, i, o)
	o.answered = time.Now()
	if o.cause == "" {
		l.ok.Add(1)
		return
	}
	l.failed.Add(1)
}

// httpCaller sends the -method, -path, -body and -header request shape.
type httpCaller struct {
	cfg     *drillConfig
	baseURL string
	client  *http.Client
}

func (httpCaller) retries() int { return 0 }
func (httpCaller) close()       {} // its client is the frontend's

func (c httpCaller) call(ctx context.Context, i int, o *outcome) {
	var body io.Reader
	if c.cfg.Body != "" {
		body = strings.NewReader(c.cfg.Body)
	}
	req, err := http.NewRequestWithContext(ctx, c.cfg.Method, c.baseURL+c.cfg.Paths[i%len(c.cfg.Paths)], body)
	if err == nil {
		req.Header = c.cfg.Header.Clone()
		if c.cfg.Host != "" {
			req.Host = c.cfg.Host
		}
		var resp *http.Response
		if resp, err = c.client.Do(req); err == nil {
			// The answer is whole once its body is read: a reset in the
			// middle of it is a failure too.
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			o.status = resp.StatusCode
		}
	}
	o.cause = classify(o.status, err)
	switch {
	case o.cause == "":
	case err != nil:
		o.err = err.Error()
	default:
		o.err = strconv.Itoa(o.status) + " " + http.StatusText(o.status)
	}
}

// classify returns the cause of a failed request, or "" for a success:
// any 2xx or 3xx answer read to its end.
func classify(status int, err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return causeRefused
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return causeTimeout
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return causeReset
	case err != nil:
		return causeOther
	case status >= 500:
		return cause5xx
	case status >= 400:
		return causeOther
	}
	return ""
}
