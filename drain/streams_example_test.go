package drain_test

import (
	"fmt"
	"net/http"

	"github.com/drainkit/drainkit/drain"
)

// A Server-Sent Events handler registers its stream, tells its client when
// the drain begins, and returns when its turn to close comes; the client
// reconnects to another node and resumes from its Last-Event-ID.
func ExampleStreams() {
	streams, err := drain.NewStreams(drain.StreamsConfig{Name: "events"}) // 200 closes/s at most, 2 s margin
	if err != nil {
		panic(err)
	}
	events := make(chan string) // the application's events, elsewhere
	var tracker drain.Tracker
	srv := &http.Server{Handler: tracker.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, end, ok := streams.Open(r.Context())
		if !ok { // the drain has begun: connect elsewhere
			w.Header().Set("Retry-After", drain.RetryAfter)
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		defer end()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		told := streams.Told()
		for {
			select {
			case ev := <-events:
				fmt.Fprintf(w, "id: %s\ndata: %s\n\n", ev, ev)
			case <-told: // this node is leaving; reconnect after a second
				fmt.Fprint(w, "retry: 1000\n\n")
				told = nil
			case <-ctx.Done(): // our turn: return, the server closes the response
				return
			}
			_ = rc.Flush()
		}
	}))}
	// Give these to drain.Run, lifecycle.Manager.AddHook or fxmodule.AsHook.
	hooks := append(drain.HTTPHooks("http", srv, &tracker), streams.Hooks()...)
	for _, h := range hooks {
		fmt.Println(h.Phase, h.Name)
	}
	// Output:
	// stop_intake http.stop_intake
	// wait_in_flight http.wait_in_flight
	// close http.close
	// stop_intake events.stop_intake
	// release events.close
}
