package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// BenchmarkApply is one command through the gateway's handler to an
// in-process room backend over loopback gRPC, at steady state (nothing
// to wait out). "rpc only" is the bare Apply call the handler wraps;
// "handler" adds the JSON API, the request deadline, the call slot and
// the waiting loop; "handler+cap" adds the pending cap and its metrics.
// The difference between the last two is the cap's cost, and between
// "rpc only" and "handler" what the rest of the API costs per request.
func BenchmarkApply(b *testing.B) {
	backend := startBackend(b, &testRooms{apply: applyAnswer(roompb.ApplyResponse_APPLIED, 1)}).addr
	body := `{"command_id":"c1","op":"join"}`
	serve := func(b *testing.B, h http.Handler) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/rooms/r1/commands", strings.NewReader(body)))
			if rec.Code != http.StatusOK {
				b.Fatalf("got %d; want 200: %s", rec.Code, rec.Body)
			}
		}
	}
	b.Run("rpc only", func(b *testing.B) {
		a := benchAPI(b, backend, false)
		rooms, err := a.b.rooms()
		if err != nil {
			b.Fatal(err)
		}
		req := &roompb.ApplyRequest{RoomId: "r1", CommandId: "c1", Op: "join"}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rooms.Apply(context.Background(), req, grpc.WaitForReady(true)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("handler", func(b *testing.B) { serve(b, benchAPI(b, backend, false).routes()) })
	b.Run("handler+cap", func(b *testing.B) { serve(b, benchAPI(b, backend, true).routes()) })
}

func benchAPI(b *testing.B, addr string, capped bool) *api {
	b.Helper()
	be := newBackends(Config{Backends: []string{addr}}, quiet())
	if err := be.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = be.Close(context.Background()) })
	var p *pending
	if capped {
		var err error
		if p, err = newPending(Config{MaxPending: DefaultMaxPending, MaxPendingBytes: DefaultMaxPendingBytes}, prometheus.NewRegistry()); err != nil {
			b.Fatal(err)
		}
	}
	a, err := newAPI(be, p, Config{RequestTimeout: 10 * time.Second}, quiet(), nil)
	if err != nil {
		b.Fatal(err)
	}
	return a
}
