package readiness_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func Example() {
	st := newState(lifecycle.Running) // in a service: the lifecycle.Manager
	reg, err := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: quietLogger()}, st.State)
	if err != nil {
		panic(err)
	}
	defer reg.Close(context.Background())

	// The database gates readiness; the external IM service only reports.
	reg.Add(readiness.Check{Name: "mysql", Probe: func(context.Context) error { return nil }})
	reg.Add(readiness.Check{Name: "im", Tier: readiness.Informational,
		Probe: func(context.Context) error { return errors.New("im: 502") }})

	rep := reg.Ready(context.Background())
	fmt.Println(rep.Status)
	for _, c := range rep.Checks {
		if c.Status == readiness.StatusFail {
			fmt.Println(" ", c.Name, c.Tier, c.Message)
		}
	}

	st.set(lifecycle.Draining)
	rep = reg.Ready(context.Background())
	fmt.Println(rep.Status, rep.Reason)
	// Output:
	// degraded
	//   im informational im: 502
	// fail draining
}

func ExampleRegistry_Mount() {
	reg, _ := readiness.New(readiness.Config{Service: "gateway-service", NodeID: "gw-1", Logger: quietLogger()},
		newState(lifecycle.Starting).State)
	defer reg.Close(context.Background())
	mux := http.NewServeMux()
	reg.Mount(mux)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz/ready", nil))
	fmt.Println(rec.Code)
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz/live", nil))
	fmt.Println(rec.Code)
	// Output:
	// 503
	// 200
}

func ExampleRegistry_Heartbeat() {
	reg, _ := readiness.New(readiness.Config{Service: "room-service", NodeID: "room-1", Logger: quietLogger()},
		newState(lifecycle.Running).State)
	defer reg.Close(context.Background())
	beat, _ := reg.Heartbeat("outbox", 5*time.Second)

	// In the outbox worker's loop:
	beat()

	mux := http.NewServeMux()
	reg.Mount(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", readiness.LivePath, nil))
	fmt.Println(rec.Code)
	// Output: 200
}
