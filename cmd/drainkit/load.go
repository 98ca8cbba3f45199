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

// causes in the order the verdict lists them.
var causes = []string{causeRefused, causeReset, causeTimeout, cause5xx, causeOther}

// outcome is what became of one request.
type outcome struct {
	sent, answered time.Time
	status         int    // the answer's status code, 0 without one
	cause          string // empty for a success
	err            string // the failure, for an example
}

// load is the drill's open-loop load: one request shape, never retried.
type load struct {
	cfg     *drillConfig
	baseURL string
	client  *http.Client

	outcomes []outcome // by request number
	sent     atomic.Int64
	ok       atomic.Int64
	failed   atomic.Int64
}

func newLoad(cfg *drillConfig, fe frontend, bound time.Duration) *load {
	l := &load{cfg: cfg}
	l.baseURL, l.client = fe.target()
	l.outcomes = make([]outcome, harness.OpenLoop{Rate: cfg.Rate, Duration: bound}.Max())
	return l
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
	var body io.Reader
	if l.cfg.Body != "" {
		body = strings.NewReader(l.cfg.Body)
	}
	req, err := http.NewRequestWithContext(ctx, l.cfg.Method, l.baseURL+l.cfg.Paths[i%len(l.cfg.Paths)], body)
	o.sent = time.Now()
	if err == nil {
		req.Header = l.cfg.Header.Clone()
		if l.cfg.Host != "" {
			req.Host = l.cfg.Host
		}
		var resp *http.Response
		if resp, err = l.client.Do(req); err == nil {
			// The answer is whole once its body is read: a reset in the
			// middle of it is a failure too.
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			o.status = resp.StatusCode
		}
	}
	o.answered = time.Now()
	o.cause = classify(o.status, err)
	if o.cause == "" {
		l.ok.Add(1)
		return
	}
	l.failed.Add(1)
	if err != nil {
		o.err = err.Error()
	} else {
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
