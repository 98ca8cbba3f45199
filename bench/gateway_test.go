package bench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/drainkit/drainkit/examples/gateway/app"
	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// rooms is the room backend the gateway forwards to: a real gRPC server
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
// API handler to an in-process room backend over loopback gRPC, at steady
// state (nothing to wait out): c=now is the handler the gateway serves
// (the request deadline, waiting within it, call slots, the pending cap
// and its metrics, rendezvous-hash routing), c=rpc the bare Apply call it
// wraps: the floor. c=now is named for the runs that also measured the
// handler before the request-deadline change (c=before); BENCHMARKS.md
// keeps that comparison.
func BenchmarkGatewayApply(b *testing.B) {
	addr := startRooms(b)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	body := `{"command_id":"c1","op":"join"}`
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
	b.Run("c=now", func(b *testing.B) {
		h, closeFn, err := app.Handler(ctx, app.Config{Backends: []string{addr}}, prometheus.NewRegistry(), quiet)
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
	})
}

// warm sends commands until one is applied, so that the measurement
// starts with the backend connected and SERVING.
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
