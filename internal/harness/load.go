package harness

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// OpenLoop starts one request every 1/Rate seconds, each in a goroutine of
// its own, whatever became of the earlier ones: a slow or failing service
// meets the same arrivals a real one would, instead of a client that
// politely waits (a closed loop would send less exactly when the service
// struggles, and hide it). A request that falls behind its schedule (the
// harness itself was starved of a CPU) is started as soon as it can be.
type OpenLoop struct {
	// Rate is requests per second. Required.
	Rate int
	// Duration bounds the sending: at most Duration × Rate requests start.
	// Required.
	Duration time.Duration
	// Until, when not nil, ends the sending once it is closed.
	Until <-chan struct{}
}

// Max is the most requests l starts.
func (l OpenLoop) Max() int { return int(l.Duration.Seconds() * float64(l.Rate)) }

// Sent is what [OpenLoop.Run] started.
type Sent struct {
	// N requests were started, numbered 0 to N-1.
	N int
	// Began is when the first was started, Last when the last one was.
	Began, Last time.Time
}

// Run calls send(i) for i from 0, request i at Began + i/Rate, until
// [OpenLoop.Max] were started, Until is closed or ctx ends, and waits for
// every send to return. send is given the loop's context's life: ending
// ctx asks the sends in flight to give up too.
func (l OpenLoop) Run(ctx context.Context, send func(ctx context.Context, i int)) Sent {
	n := l.Max()
	if n <= 0 || l.Rate <= 0 {
		return Sent{}
	}
	interval := time.Second / time.Duration(l.Rate)
	var wg sync.WaitGroup
	defer wg.Wait()
	s := Sent{Began: time.Now()}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := 0; i < n; i++ {
		if i > 0 {
			timer.Reset(time.Until(s.Began.Add(time.Duration(i) * interval)))
			select {
			case <-ctx.Done():
				return s
			case <-l.Until: // a nil channel never fires
				return s
			case <-timer.C:
			}
		}
		s.N, s.Last = i+1, time.Now()
		wg.Go(func() { send(ctx, i) })
	}
	return s
}

// NewClient returns an HTTP client that opens a fresh connection for every
// request (no keep-alive) through dial (nil: the default dialer), so
// net/http never resends on its own a request that failed on a reused
// connection, and a server closing an idle connection just as a request is
// written on it cannot fail the request: every failure a load sees is one
// the service under test caused. Requests are bounded by their contexts.
func NewClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	t := &http.Transport{DisableKeepAlives: true, DialContext: dial}
	if dial == nil {
		t.DialContext = (&net.Dialer{Timeout: 30 * time.Second}).DialContext
	}
	return &http.Client{
		Transport: t,
		// A redirect is an answer, not a second request.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
