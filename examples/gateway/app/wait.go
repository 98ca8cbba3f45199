package app

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TimeoutHeader is the request header by which a client gives its own,
// shorter deadline, as a duration ("2s", "750ms"). The gateway answers
// within min(REQUEST_TIMEOUT, this).
const TimeoutHeader = "Request-Timeout"

// retryBackoff paces the attempts of one request while it waits out a
// fault: grpc-go's exponential backoff, with a ceiling low enough that a
// room taken over by another node is found within a fifth of a second.
// The jitter keeps the requests that waited out one fault from arriving
// together when it ends.
var retryBackoff = backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond}

// retryDelay is the wait before attempt retries+1, computed as grpc-go's
// own exponential strategy does for retryBackoff (that implementation is
// internal to grpc-go).
func retryDelay(retries int) time.Duration {
	d := float64(retryBackoff.BaseDelay) * math.Pow(retryBackoff.Multiplier, float64(retries))
	d = min(d, float64(retryBackoff.MaxDelay))
	d *= 1 + retryBackoff.Jitter*(rand.Float64()*2-1)
	return time.Duration(d)
}

// answerMargin is how long before a request's deadline the gateway stops
// waiting, so that its answer (503 or 504) reaches the client before the
// client's own timer fires.
func answerMargin(budget time.Duration) time.Duration {
	return min(budget/20, 100*time.Millisecond)
}

// requestBudget is the time the gateway has for r: REQUEST_TIMEOUT, or the
// client's shorter Request-Timeout. A malformed header is an error naming
// it and its value.
func requestBudget(r *http.Request, max time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(r.Header.Get(TimeoutHeader))
	if v == "" {
		return max, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("header %s %s: want a positive duration such as 2s or 750ms", TimeoutHeader, quote(v))
	}
	return min(d, max), nil
}

// within calls attempt until it succeeds, fails for good, or ctx ends,
// backing off between attempts. What it waits out:
//
//   - a refusal (UNAVAILABLE): nothing was applied, no backend was ready,
//     an owner refused the connection, a node is draining, a room moving;
//   - an unknown outcome (UNKNOWN, or DEADLINE_EXCEEDED from a server
//     while ctx still runs): the next attempt resends the same request,
//     which room-service answers as the first application did.
//
// When ctx ends, or is about to (less than two backoff delays left), it
// answers UNAVAILABLE if no attempt can have been applied
// (the client gets 503 and may retry anywhere), DEADLINE_EXCEEDED if one
// may have been (504: outcome unknown). Any other failure is final at once;
// after an attempt that may have been applied, it is an *afterUnknown.
// retried is told of each attempt sent again, after a "refused" or an
// "unknown" outcome: the retries made on the client's behalf, counted.
// unknownMeans says what an unknown outcome means to the caller, in the
// 504's message ("an earlier one may have been applied" for a command).
func within[T any](ctx context.Context, retried func(after string), unknownMeans string, attempt func(context.Context) (T, error)) (T, error) {
	var zero T
	maybeApplied := false
	after := ""
	for retries := 0; ; retries++ {
		if retries > 0 {
			retried(after)
		}
		v, err := attempt(ctx)
		switch status.Code(err) {
		case codes.OK:
			return v, nil
		case codes.Unavailable:
			after = "refused"
		case codes.Unknown, codes.DeadlineExceeded, codes.Canceled:
			maybeApplied, after = true, "unknown"
		default:
			if maybeApplied {
				return zero, &afterUnknown{err: err, attempts: retries + 1}
			}
			return zero, err
		}
		// Give up now rather than start an attempt that the deadline would
		// cut short: one cut after reaching a server makes the outcome
		// unknown (504) where a refusal had made it certain (503).
		delay := retryDelay(retries)
		if deadline, ok := ctx.Deadline(); ctx.Err() == nil && (!ok || time.Until(deadline) > 2*delay) {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
				continue
			}
		}
		msg := status.Convert(err).Message()
		if maybeApplied {
			return zero, status.Errorf(codes.DeadlineExceeded, "gave up after %d attempts, %s: %s", retries+1, unknownMeans, msg)
		}
		return zero, status.Errorf(codes.Unavailable, "gave up after %d attempts, none applied: %s", retries+1, msg)
	}
}

// afterUnknown is a final failure of [within] after an earlier attempt
// whose outcome is unknown: it keeps its own code (a read answers it as
// such), and says nothing of whether that attempt was applied, which a
// command's caller must answer as unknown (see forwardApply).
type afterUnknown struct {
	err      error
	attempts int
}

func (e *afterUnknown) Error() string              { return e.err.Error() }
func (e *afterUnknown) Unwrap() error              { return e.err }
func (e *afterUnknown) GRPCStatus() *status.Status { return status.Convert(e.err) }
