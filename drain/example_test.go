package drain_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drainkit/drainkit/drain"
)

// Hooks run phase by phase under one deadline; the report says how each ended.
func ExampleRun() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := drain.Run(ctx, "example", []drain.Hook{
		{Name: "redis.close", Phase: drain.Close, Run: func(context.Context) error { return nil }},
		{Name: "snapshots", Phase: drain.Flush, Run: func(context.Context) error { return errors.New("disk full") }},
		{Name: "http.stop_intake", Phase: drain.StopIntake, Run: func(context.Context) error { return nil }},
	})
	for _, h := range r.Hooks {
		fmt.Println(h.Phase, h.Name, h.Outcome)
	}
	fmt.Println(r.Err())
	// Output:
	// stop_intake http.stop_intake ok
	// flush snapshots failed
	// close redis.close ok
	// flush hook "snapshots": failed: disk full
}

// The tracker refuses new work once intake is closed, and Wait returns as
// soon as the work in flight has finished. The zero value is ready to use.
func ExampleTracker() {
	var t drain.Tracker
	t.Begin() // a request arrives
	t.CloseIntake()
	fmt.Println("new work accepted:", t.Begin())
	go t.End() // the request finishes
	fmt.Println("wait:", t.Wait(context.Background()))
	// Output:
	// new work accepted: false
	// wait: <nil>
}
