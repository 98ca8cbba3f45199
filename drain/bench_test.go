package drain_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/drainkit/drainkit/drain"
)

// discardWriter is the cheapest http.ResponseWriter, so the benchmark
// measures the middleware rather than a recorder's allocations.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

var trivial = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })

// BenchmarkMiddleware compares a trivial handler bare and wrapped by the
// tracker, in-process (the harshest ratio: the handler does nearly nothing)
// and over real HTTP on loopback (what a service sees).
//
//	go test -run=^$ -bench=Middleware -count=6 ./drain
func BenchmarkMiddleware(b *testing.B) {
	tr := new(drain.Tracker)
	handlers := []struct {
		name string
		h    http.Handler
	}{{"bare", trivial}, {"tracked", tr.Middleware(trivial)}}
	for _, hh := range handlers {
		b.Run("inprocess/"+hh.name, func(b *testing.B) {
			req, _ := http.NewRequest("GET", "/", nil)
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					hh.h.ServeHTTP(w, req)
				}
			})
		})
	}
	for _, hh := range handlers {
		b.Run("loopback/"+hh.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := &http.Server{Handler: hh.h}
			go func() { _ = srv.Serve(ln) }()
			defer srv.Close()
			url := "http://" + ln.Addr().String() + "/"
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			defer client.CloseIdleConnections()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(url)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}

// BenchmarkDrainLag measures the time from the end of the last in-flight
// request to the drain moving on, for http.Server.Shutdown alone and for
// drain.HTTPHooks, side by side on the same request. The figure is the
// median lag in ms (lag-ms); ns/op is dominated by the request itself.
//
//	go test -run=^$ -bench=DrainLag -benchtime=5x ./drain
func BenchmarkDrainLag(b *testing.B) {
	for _, d := range []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, time.Second, 2300 * time.Millisecond} {
		for _, how := range []string{"shutdown", "drainkit"} {
			b.Run(how+"/"+d.String(), func(b *testing.B) {
				lags := make([]float64, 0, b.N)
				for b.Loop() {
					lags = append(lags, drainLag(b, d, how == "drainkit"))
				}
				sort.Float64s(lags)
				b.ReportMetric(lags[len(lags)/2], "lag-ms")
			})
		}
	}
}

// drainLag serves one request of duration d, starts the drain while it
// runs, and returns how long after the handler ended the drain returned.
func drainLag(b *testing.B, d time.Duration, ours bool) float64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	entered, ended := make(chan struct{}), make(chan time.Time, 1)
	tr := new(drain.Tracker)
	srv := &http.Server{Handler: tr.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		time.Sleep(d) // the request's own work
		_, _ = w.Write([]byte("done"))
		ended <- time.Now()
	}))}
	hooks := drain.HTTPHooks("http", srv, tr)
	go func() { _ = srv.Serve(ln) }()
	go func() {
		if resp, err := http.Get("http://" + ln.Addr().String()); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	<-entered
	ctx := context.Background()
	if ours {
		for _, h := range hooks {
			if err := h.Run(ctx); err != nil {
				b.Fatal(err)
			}
		}
	} else if err := srv.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	done := time.Now()
	return float64(done.Sub(<-ended).Microseconds()) / 1000
}
