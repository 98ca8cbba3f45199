package bench

import (
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
)

// repetitionEnv holds the repetition's number, set by bench/run.
const repetitionEnv = "BENCH_REPETITION"

// contender is one side of a side-by-side benchmark.
type contender struct {
	name  string
	bench func(b *testing.B)
}

// inTurn runs each contender as the sub-benchmark c=name, starting at the
// repetition's number (BENCH_REPETITION) and wrapping around: with a fixed
// order, whatever the first sub-benchmark of a process pays (the process
// and the server warming up) is charged to one contender in every
// repetition.
func inTurn(b *testing.B, contenders []contender) {
	first, _ := strconv.Atoi(os.Getenv(repetitionEnv))
	for i := range contenders {
		c := contenders[(first+i)%len(contenders)]
		b.Run("c="+c.name, c.bench)
	}
}

// empty is the floor of every HTTP table: a handler that answers 200 with
// no body. No health library can answer a probe faster over the same HTTP
// stack.
var empty = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

// serve starts h on a loopback listener and returns its probe URL and a
// function that closes the server and waits for Serve to return.
func serve(b *testing.B, h http.Handler) (string, func()) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	// Every contender is probed at drainkit's ready path: drainkit's
	// handler is a mux that serves only its two paths; the others answer
	// on any path.
	return "http://" + ln.Addr().String() + "/healthz/ready", func() {
		_ = srv.Close()
		<-done
	}
}

// newClient returns an HTTP client that keeps up to conns connections to
// one host alive, so the benchmark measures requests, not TCP handshakes.
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		DisableCompression:  true,
	}}
}

// get performs one GET and drains the body, returning the status code.
func get(c *http.Client, url string) (int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// percentile returns the p-th percentile (0..100) of d, nearest rank; d is
// sorted in place. It returns 0 for no samples.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(float64(len(d))*p/100+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// ms converts a duration to milliseconds for b.ReportMetric.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// settledGoroutines waits until the goroutine count has not changed for
// 100 ms (at most 3 s), so that goroutines that are merely on their way
// out (connection readers, timers) are not counted as left behind.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	stable := time.Now()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if m := runtime.NumGoroutine(); m != n {
			n, stable = m, time.Now()
		} else if time.Since(stable) >= 100*time.Millisecond {
			break
		}
	}
	return n
}
