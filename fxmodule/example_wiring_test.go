package fxmodule_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// Example's wiring, on a free port: liveness answers 200 through the whole
// drain (README: "Liveness answers 200 throughout"), and no probe counts
// as traffic after the flip. The probes were behind the tracker: 503 from
// stop_intake, and a WARN advising a longer DRAIN_DELAY on every rollout.
func TestExampleServerKeepsLivenessThroughTheDrain(t *testing.T) {
	addr := freeAddr(t)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	get := func(path string) string {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return fmt.Sprint(resp.StatusCode)
	}
	var live string
	probe := drain.Hook{Name: "test.probe", Phase: drain.Flush, Run: func(context.Context) error {
		live = get("/healthz/live") // after stop_intake and wait_in_flight, before close
		return nil
	}}
	app := fxmoduletest.Start(t,
		fxmodule.Module,
		fx.Supply(lifecycle.Config{Service: "ex", DrainDelay: 50 * time.Millisecond}),
		fx.Provide(
			newSnapshotFlusher,
			newServer,
			fxmodule.AsHook(flushHook),
			fxmodule.AsHook(serverHooks),
			fxmodule.AsCheck(func() readiness.Check {
				return readiness.Check{Name: "database", Tier: readiness.Gating,
					Probe: func(ctx context.Context) error { return nil }}
			}),
			fxmodule.AsHook(func() drain.Hook { return probe }),
		),
		fx.Decorate(func(s *http.Server) *http.Server { s.Addr = addr; return s }),
		fx.Invoke(listen),
	)
	if got := get("/healthz/live"); got != "200" {
		t.Fatalf("live before drain: %s", got)
	}
	r := app.Stop()
	if live != "200" {
		t.Errorf("GET /healthz/live during the drain (phase flush) = %s, want 200", live)
	}
	if r.ExitCode != lifecycle.ExitClean || r.RefusedAfterIntake != 0 {
		t.Errorf("exit %d, refused after intake %d; want %d and 0: a probe is no request", r.ExitCode, r.RefusedAfterIntake, lifecycle.ExitClean)
	}
}
