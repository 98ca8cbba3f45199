package bench

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkReadyCached: requests per second of a cached ready probe (three
// healthy checks) over real HTTP on loopback, beside the empty handler and
// the bare answer the health guide requires (buildBareReady). 16 client
// goroutines keep both cores busy, so ns/op is the CPU cost of a probe,
// client included. Target: drainkit at least 95% of empty.
//
//	go test -run='^$' -bench='ReadyCached' -count=5 ./bench
func BenchmarkReadyCached(b *testing.B) {
	contenders := append([]readyContender{readyContenders[0], {"bare", buildBareReady}}, readyContenders[1:]...)
	turns := make([]contender, len(contenders))
	for i, c := range contenders {
		turns[i] = contender{c.name, func(b *testing.B) {
			h, release := c.build(b, instantChecks(3))
			defer release()
			url, stop := serve(b, h)
			defer stop()
			client := newClient(64)
			defer client.CloseIdleConnections()
			if code, err := get(client, url); err != nil || code != http.StatusOK {
				b.Fatalf("warm-up probe: got %d, %v; want 200", code, err)
			}
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if code, err := get(client, url); err != nil || code != http.StatusOK {
						b.Errorf("probe: got %d, %v; want 200", code, err)
						return
					}
				}
			})
		}}
	}
	inTurn(b, turns)
}

// BenchmarkReadyChecks: in-process cost of one ready probe (no network)
// against the number of registered healthy checks, cached where the
// library caches.
//
//	go test -run='^$' -bench='ReadyChecks' -count=5 ./bench
func BenchmarkReadyChecks(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		for _, c := range readyContenders {
			b.Run("checks="+strconv.Itoa(n)+"/c="+c.name, func(b *testing.B) {
				h, release := c.build(b, instantChecks(n))
				defer release()
				req, _ := http.NewRequest("GET", "/healthz/ready", nil)
				h.ServeHTTP(&discard{h: http.Header{}}, req) // warm the cache
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					w := &discard{h: http.Header{}}
					for pb.Next() {
						clear(w.h)
						h.ServeHTTP(w, req)
					}
				})
			})
		}
	}
}

// discard is the cheapest http.ResponseWriter, so in-process figures
// measure the handler, not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkReadyStampede: 1,000 clients probe as fast as they can for 2 s,
// over loopback HTTP, against one 50 ms check, starting cold (the first
// probes find no result). Reported: check executions (runs), probes
// answered, clients that got no answer at all, and p99 latency. A probe
// still waiting when the window closes counts with the time it had waited,
// so a library that leaves clients hanging cannot look fast.
// Targets: one execution per 1 s TTL window, every client answered, p99
// within 1.1x of the empty handler's under the same load.
//
//	go test -run='^$' -bench='ReadyStampede' -benchtime=1x -count=3 ./bench
func BenchmarkReadyStampede(b *testing.B) {
	const (
		clients   = 1000
		window    = 2 * time.Second
		checkTime = 50 * time.Millisecond
	)
	for _, c := range readyContenders {
		b.Run("c="+c.name, func(b *testing.B) {
			var sum stampedeResult
			for b.Loop() {
				var runs atomic.Int64
				slow := func(ctx context.Context) error {
					runs.Add(1)
					t := time.NewTimer(checkTime)
					defer t.Stop()
					select {
					case <-t.C:
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				h, release := c.build(b, []namedCheck{{"slow", slow}})
				r := stampede(b, h, clients, window, &runs)
				release()
				sum.add(r)
			}
			n := float64(b.N)
			b.ReportMetric(float64(sum.runs)/n, "runs")
			b.ReportMetric(float64(sum.answered)/n, "answered")
			b.ReportMetric(float64(sum.unanswered)/n, "clients-unanswered")
			b.ReportMetric(ms(sum.p99)/n, "p99-ms")
		})
	}
}

type stampedeResult struct {
	runs, answered, unanswered int64
	p99                        time.Duration
}

func (s *stampedeResult) add(r stampedeResult) {
	s.runs += r.runs
	s.answered += r.answered
	s.unanswered += r.unanswered
	s.p99 += r.p99
}

// stampede serves h and lets clients probe it in a closed loop for window.
// runs is read when the window closes: executions a library starts later,
// for probes whose clients have gone, are not counted.
func stampede(b *testing.B, h http.Handler, clients int, window time.Duration, runs *atomic.Int64) stampedeResult {
	url, stop := serve(b, h)
	defer stop()
	client := newClient(clients)
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	runsInWindow := make(chan int64, 1)
	go func() {
		<-ctx.Done()
		runsInWindow <- runs.Load()
	}()

	var (
		mu         sync.Mutex
		lat        []time.Duration
		answered   int64
		unanswered int64
		wg         sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			got := 0
			for ctx.Err() == nil {
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
				resp, err := client.Do(req)
				if err == nil {
					// Read to EOF, or the connection is not reused and every
					// probe that carries a body pays a new dial.
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					got++
				} else if !errors.Is(err, context.DeadlineExceeded) {
					b.Errorf("probe: %v", err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			answered += int64(got)
			if got == 0 {
				unanswered++
			}
		})
	}
	wg.Wait()
	return stampedeResult{runs: <-runsInWindow, answered: answered, unanswered: unanswered, p99: percentile(lat, 99)}
}

// BenchmarkReadyHungCheck: one check that ignores its context and never
// returns, among three healthy ones, probed over loopback every 25 ms for
// 3 s (120 probes, each on its own goroutine so a slow answer does not
// delay the next probe), after one warm-up probe. Each probe gives up after
// 1 s, kubelet's default timeoutSeconds; a probe that gave up counts as
// failed, with the second it waited. Reported: p99 probe latency, probes
// slower than 100 ms, failed probes, executions of the hung check, and
// goroutines left behind once the server and client are closed and the
// count has settled (at most 3 s). Targets: p99 not stalled by the hung
// check; one goroutine left in total.
//
//	go test -run='^$' -bench='ReadyHungCheck' -benchtime=1x -count=1 ./bench
func BenchmarkReadyHungCheck(b *testing.B) {
	const (
		interval = 25 * time.Millisecond
		window   = 3 * time.Second
	)
	for _, c := range readyContenders[1:] { // the empty handler has no check to hang
		b.Run("c="+c.name, func(b *testing.B) {
			var p99 time.Duration
			var left, runs, slow, failed int64
			for b.Loop() {
				hang := make(chan struct{})
				var started atomic.Int64
				hung := func(context.Context) error {
					started.Add(1)
					<-hang // ignores its context, as a stuck driver call does
					return nil
				}
				before := settledGoroutines()
				checks := append(instantChecks(3), namedCheck{"hung", hung})
				h, release := c.build(b, checks)
				url, stop := serve(b, h)
				client := newClient(64)
				client.Timeout = time.Second
				_, _ = get(client, url) // warm-up: the first result exists

				var (
					mu  sync.Mutex
					lat []time.Duration
					wg  sync.WaitGroup
				)
				tick := time.NewTicker(interval)
				for end := time.Now().Add(window); time.Now().Before(end); <-tick.C {
					wg.Go(func() {
						t0 := time.Now()
						_, err := get(client, url) // a timeout is a result here
						d := time.Since(t0)
						mu.Lock()
						lat = append(lat, d)
						if err != nil {
							failed++
						}
						if d > 100*time.Millisecond {
							slow++
						}
						mu.Unlock()
					})
				}
				tick.Stop()
				wg.Wait()
				stop()
				client.CloseIdleConnections()
				left += int64(settledGoroutines() - before)
				runs += started.Load()
				p99 += percentile(lat, 99)
				close(hang) // let the stuck calls return before the next contender
				release()
			}
			n := int64(b.N)
			b.ReportMetric(ms(p99)/float64(n), "p99-ms")
			b.ReportMetric(float64(runs/n), "runs")
			b.ReportMetric(float64(left/n), "goroutines-left")
			b.ReportMetric(float64(slow/n), "probes-over-100ms")
			b.ReportMetric(float64(failed/n), "probes-failed")
		})
	}
	runtime.GC()
}

// buildBareReady is the least a ready probe the health guide allows can
// do, with no library and no check: routed by a ServeMux as drainkit's
// is, it answers the JSON an ok report has (status, service, node, the
// time in milliseconds) with drainkit's two headers. It is the floor under
// the cached-probe table: what the HTTP exchange itself costs beyond the
// empty handler.
func buildBareReady(*testing.B, []namedCheck) (http.Handler, func()) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz/ready", func(w http.ResponseWriter, _ *http.Request) {
		b := make([]byte, 0, 128)
		b = append(b, `{"status":"ok","service":"room-service","node_id":"bench","time_unix_ms":`...)
		b = strconv.AppendInt(b, time.Now().UnixMilli(), 10)
		b = append(b, "}\n"...)
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Cache-Control"] = []string{"no-store"}
		_, _ = w.Write(b)
	})
	return mux, func() {}
}
