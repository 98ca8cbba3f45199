package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drainkit/drainkit/drain"
)

// drainServer is one HTTP server with n requests in flight, and the two
// ways to stop it: http.Server.Shutdown alone, or drainkit's HTTP hooks
// (StopIntake then WaitInFlight) over a drain.Tracker middleware.
type drainServer struct {
	srv         *http.Server
	hooks       []drain.Hook
	release     chan struct{} // closing it lets every handler return
	waiting     chan struct{} // closed once the drain waits for the requests
	markWaiting func()
	lastEnd     atomic.Int64   // UnixNano of the latest handler return
	lastClose   atomic.Int64   // UnixNano of the latest connection closed
	client      *http.Client   // in-process clients
	clients     sync.WaitGroup //
	proc        *exec.Cmd      // or a client process
}

// startDrainServer serves n requests that each wait for release (or for
// hold, if hold > 0) and returns once all n are inside their handler. The
// clients keep their connections alive, as a load balancer does: after its
// response a connection stays idle until the drain closes it.
func startDrainServer(b *testing.B, n int, hold time.Duration, external bool) *drainServer {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &drainServer{release: make(chan struct{}), waiting: make(chan struct{})}
	s.markWaiting = sync.OnceFunc(func() { close(s.waiting) })
	var entered sync.WaitGroup
	entered.Add(n)
	tr := new(drain.Tracker)
	s.srv = &http.Server{Handler: tr.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Done()
		if hold > 0 {
			time.Sleep(hold) // the request's own work
		} else {
			<-s.release
		}
		_, _ = w.Write([]byte("done"))
		latest(&s.lastEnd, time.Now().UnixNano())
	}))}
	s.hooks = drain.HTTPHooks("http", s.srv, tr) // before Serve: it wraps ConnState
	// Wrapped around the hooks' ConnState, so a close is recorded before
	// drainkit counts it: the drain cannot end before its last close is
	// known. net/http calls it on the connection's goroutine.
	counted := s.srv.ConnState
	s.srv.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			latest(&s.lastClose, time.Now().UnixNano())
		}
		counted(c, st)
	}
	// Shutdown runs this once its listeners are closed: from then on it
	// waits for the requests. drainkit waits for them once its
	// stop_intake hook has returned (stop).
	s.srv.RegisterOnShutdown(s.markWaiting)
	go func() { _ = s.srv.Serve(ln) }()

	url := "http://" + ln.Addr().String()
	if external {
		// The clients live in another process (this test binary in client
		// mode, see TestMain), so that 10,000 connections fit under the
		// open-file limit: each process holds one end of each.
		s.proc = exec.Command(os.Args[0])
		s.proc.Env = append(os.Environ(), clientURLEnv+"="+url, clientCountEnv+"="+strconv.Itoa(n))
		s.proc.Stdout, s.proc.Stderr = os.Stdout, os.Stderr
		if err := s.proc.Start(); err != nil {
			b.Fatal(err)
		}
	} else {
		s.client = newClient(n)
		for range n {
			s.clients.Go(func() { _, _ = get(s.client, url) })
		}
	}
	entered.Wait()
	return s
}

// stop drains the server the given way and returns when the drain has
// finished waiting for the requests (done): Shutdown's return, or the end
// of drainkit's wait_in_flight, once every response is written and its
// connection closed. drainkit keeps the listener open until phase close,
// which in a real drain comes phases later; its close hook then closes the
// server, off the clock (closeTook), as Shutdown's own listener close came
// before the requests were released.
func (s *drainServer) stop(b *testing.B, how string) (done time.Time, closeTook time.Duration) {
	ctx := context.Background()
	switch how {
	case "shutdown":
		if err := s.srv.Shutdown(ctx); err != nil {
			b.Error(err)
		}
		return time.Now(), 0
	case "drainkit":
		for _, h := range s.hooks {
			if err := h.Run(ctx); err != nil {
				b.Error(err)
			}
			switch h.Phase {
			case drain.StopIntake:
				s.markWaiting()
			case drain.WaitInFlight:
				done = time.Now()
			}
		}
		return done, time.Since(done)
	}
	b.Fatalf("unknown drainer %q", how)
	return
}

// finish waits for the clients and closes their idle connections.
func (s *drainServer) finish(b *testing.B) {
	if s.proc != nil {
		if err := s.proc.Wait(); err != nil {
			b.Errorf("client process: %v", err)
		}
		return
	}
	s.clients.Wait()
	s.client.CloseIdleConnections()
}

// Client mode of this test binary, used by startDrainServer.
const (
	clientURLEnv   = "BENCH_DRAIN_CLIENT_URL"
	clientCountEnv = "BENCH_DRAIN_CLIENT_COUNT"
)

// runClients sends n concurrent GETs to url, each on its own connection,
// and returns the process exit code once all are answered. Dials are
// limited so the listen backlog never overflows into SYN retransmits.
func runClients(url string, n int) int {
	dials := make(chan struct{}, 128)
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: n,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials <- struct{}{}
			defer func() { <-dials }()
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if code, err := get(client, url); err != nil || code != http.StatusOK {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		fmt.Fprintf(os.Stderr, "bench client: %d of %d requests failed\n", f, n)
		return 1
	}
	return 0
}

// latest stores t in v unless v holds a later time.
func latest(v *atomic.Int64, t int64) {
	for {
		last := v.Load()
		if t <= last || v.CompareAndSwap(last, t) {
			return
		}
	}
}

// lag is how long after the last handler returned the drain finished.
func (s *drainServer) lag(done time.Time) time.Duration {
	return done.Sub(time.Unix(0, s.lastEnd.Load()))
}

// afterClose is how long after net/http closed the last connection the
// drain finished. For drainkit, which waits for every connection's close,
// it is exact once the drain returned. Shutdown closes idle connections
// itself and returns without waiting for their goroutines to record the
// close, so its figure may miss late ones, or be 0 if one closed after it
// returned.
func (s *drainServer) afterClose(done time.Time) time.Duration {
	return max(done.Sub(time.Unix(0, s.lastClose.Load())), 0)
}

var drainers = []string{"shutdown", "drainkit"}

// BenchmarkDrainLag: one request of d in flight when the drain starts;
// reported is the time from that request's handler returning to the drain
// having stopped the server (lag-ms, median; lag-max-ms). Each op drains 4
// servers at once, so one request's duration yields 4 samples.
// http.Server.Shutdown polls for idle connections on a schedule that grows
// to 500 ms; drainkit is told when the last response is written. Target:
// about 1 ms at every d.
//
//	go test -run='^$' -bench='DrainLag' -benchtime=1x -count=3 ./bench
func BenchmarkDrainLag(b *testing.B) {
	const servers = 4
	for _, d := range []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, time.Second, 2300 * time.Millisecond} {
		for _, how := range drainers {
			b.Run("d="+d.String()+"/c="+how, func(b *testing.B) {
				var lags []time.Duration
				for b.Loop() {
					var (
						mu sync.Mutex
						wg sync.WaitGroup
					)
					for range servers {
						wg.Go(func() {
							s := startDrainServer(b, 1, d, false)
							done, _ := s.stop(b, how)
							l := s.lag(done)
							s.finish(b)
							mu.Lock()
							lags = append(lags, l)
							mu.Unlock()
						})
					}
					wg.Wait()
				}
				b.ReportMetric(ms(percentile(lags, 50)), "lag-ms")
				b.ReportMetric(ms(slices.Max(lags)), "lag-max-ms")
			})
		}
	}
}

// BenchmarkDrainInFlight: n requests in flight (each on its own
// connection) when the drain starts; once it has closed the listeners all
// their handlers return at once. Reported: time from the last handler's return to the
// server stopped (lag-ms); of it, the time after net/http closed the last
// connection (after-close-ms: the drainer's own part, the rest is net/http
// finishing responses on goroutines the scheduler has not run yet); and the
// server's live heap and stacks per in-flight request before the drain
// (B/request); and drainkit's close hook, run after the lag is taken
// (close-ms, see stop). Shows how each drain
// scales with the work it waits for. The clients run in a child process; each side needs about
// n+1,000 open files (raised up to the hard limit if need be).
//
//	go test -run='^$' -bench='DrainInFlight' -benchtime=1x -count=3 ./bench
func BenchmarkDrainInFlight(b *testing.B) {
	for _, n := range []int{1, 100, 1_000, 10_000} {
		for _, how := range drainers {
			b.Run("inflight="+strconv.Itoa(n)+"/c="+how, func(b *testing.B) {
				if err := raiseFileLimit(uint64(n + 1024)); err != nil {
					b.Fatal(err)
				}
				var lag, afterClose, closing time.Duration
				var held int64
				b.StopTimer()
				for range b.N {
					before := memInUse()
					s := startDrainServer(b, n, 0, true)
					held += memInUse() - before
					b.StartTimer()
					type result struct {
						done      time.Time
						closeTook time.Duration
					}
					stopped := make(chan result, 1)
					go func() {
						done, took := s.stop(b, how)
						stopped <- result{done, took}
					}()
					<-s.waiting // the drain is now waiting
					close(s.release)
					r := <-stopped
					done := r.done
					closing += r.closeTook
					lag += s.lag(done)
					b.StopTimer()
					s.finish(b)
					afterClose += s.afterClose(done)
				}
				b.ReportMetric(ms(lag)/float64(b.N), "lag-ms")
				b.ReportMetric(ms(afterClose)/float64(b.N), "after-close-ms")
				b.ReportMetric(ms(closing)/float64(b.N), "close-ms") // drainkit's close hook, off the lag
				b.ReportMetric(float64(held)/float64(b.N*n), "B/request")
			})
		}
	}
}

// memInUse is the server process's live heap and goroutine stacks, after
// a collection: with every request in flight, what holding them costs
// (the clients live in another process).
func memInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// raiseFileLimit makes sure at least n files can be open.
func raiseFileLimit(n uint64) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= n {
		return nil
	}
	want := syscall.Rlimit{Cur: n, Max: max(l.Max, n)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return fmt.Errorf("open files limit %d is below the %d needed and cannot be raised (%v): run ulimit -n %d first", l.Cur, n, err, n)
	}
	return nil
}
