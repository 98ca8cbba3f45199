package bench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/drainkit/drainkit/bench/internal/gatewaybefore"
	"github.com/drainkit/drainkit/examples/gateway/app"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// rooms is the room backend both gateways forward to: a real gRPC server
// on loopback that applies every command at once (APPLIED, the next seq)
// and reports room-service SERVING on grpc.health.v1, as a healthy
// room-service does. Its own work is the same for every contender.
type rooms struct {
	roompb.UnimplementedRoomsServer
	seq atomic.Int64
}

func (r *rooms) Apply(context.Context, *roompb.ApplyRequest) (*roompb.ApplyResponse, error) {
	return &roompb.ApplyResponse{Status: roompb.ApplyResponse_APPLIED, Seq: r.seq.Add(1)}, nil
}

// startRooms serves a rooms backend on a loopback port until b ends.
func startRooms(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	roompb.RegisterRoomsServer(srv, &rooms{})
	hs := health.NewServer()
	hs.SetServingStatus(app.HealthService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	b.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return ln.Addr().String()
}

// BenchmarkGatewayApply is one command through the example gateway's room
// API handler to the same in-process room backend over loopback gRPC, at
// steady state (nothing to wait out): c=before is the handler before the
// request-deadline change (bench/internal/gatewaybefore), c=now the
// handler the gateway serves today (the request deadline, waiting within
// it, call slots, the pending cap and its metrics, rendezvous-hash
// routing). c=rpc is the bare Apply call both wrap: the floor. The ratio
// now ÷ before is the change's steady-state overhead.
func BenchmarkGatewayApply(b *testing.B) {
	addr := startRooms(b)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	body := `{"command_id":"c1","op":"join"}`
	run := func(b *testing.B, h http.Handler, closeFn func() error, err error) {
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = closeFn() })
		warm(b, h, body)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/rooms/r1/commands", strings.NewReader(body)))
			if rec.Code != http.StatusOK {
				b.Fatalf("got %d; want 200: %s", rec.Code, rec.Body)
			}
		}
	}
	b.Run("c=rpc", func(b *testing.B) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		c := roompb.NewRoomsClient(conn)
		req := &roompb.ApplyRequest{RoomId: "r1", CommandId: "c1", Op: "join"}
		if _, err := c.Apply(ctx, req, grpc.WaitForReady(true)); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.Apply(ctx, req, grpc.WaitForReady(true)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("c=before", func(b *testing.B) {
		h, closeFn, err := gatewaybefore.Handler(ctx, gatewaybefore.Config{Backends: []string{addr}}, quiet)
		run(b, h, closeFn, err)
	})
	b.Run("c=now", func(b *testing.B) {
		h, closeFn, err := app.Handler(ctx, app.Config{Backends: []string{addr}}, prometheus.NewRegistry(), quiet)
		run(b, h, closeFn, err)
	})
}

// BenchmarkGatewayOverhead measures the same ratio as
// BenchmarkGatewayApply with the two handlers interleaved request by
// request (before, now, now, before), so that whatever else the machine
// does lands on both alike: it reports each handler's median time per
// command and now ÷ before (now/before; the target is at most 1.05).
func BenchmarkGatewayOverhead(b *testing.B) {
	addr := startRooms(b)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	body := `{"command_id":"c1","op":"join"}`
	before, closeBefore, err := gatewaybefore.Handler(ctx, gatewaybefore.Config{Backends: []string{addr}}, quiet)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = closeBefore() })
	now, closeNow, err := app.Handler(ctx, app.Config{Backends: []string{addr}}, prometheus.NewRegistry(), quiet)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = closeNow() })
	warm(b, before, body)
	warm(b, now, body)
	one := func(h http.Handler) time.Duration {
		req := httptest.NewRequest("POST", "/api/v1/rooms/r1/commands", strings.NewReader(body))
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		d := time.Since(start)
		if rec.Code != http.StatusOK {
			b.Fatalf("got %d; want 200: %s", rec.Code, rec.Body)
		}
		return d
	}
	var tb, tn []time.Duration
	for b.Loop() {
		tb = append(tb, one(before))
		tn = append(tn, one(now))
		tn = append(tn, one(now))
		tb = append(tb, one(before))
	}
	// Medians, not means: on a shared machine a request now and then waits
	// milliseconds for a core, and one such wait moves a mean by more than
	// the difference measured.
	mb, mn := median(tb), median(tn)
	b.ReportMetric(float64(mb.Nanoseconds()), "before-ns/cmd")
	b.ReportMetric(float64(mn.Nanoseconds()), "now-ns/cmd")
	b.ReportMetric(float64(mn)/float64(mb), "now/before")
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// warm sends commands until one is applied, so that the measurement
// starts with the backend connected and SERVING (the old handler does
// not wait for a ready backend: its first calls may be refused).
func warm(b *testing.B, h http.Handler, body string) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/rooms/r1/commands", strings.NewReader(body)))
		if rec.Code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("backend not ready after 10s: %d %s", rec.Code, rec.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
