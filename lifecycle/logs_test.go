package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/lifecycle"
)

// With no Logger and no slog.SetDefault, the lines go through slog's own
// default handler, which prints text; the report line must still hold
// the report as a JSON object, as the docs promise, not as an escaped
// string.
func TestReportIsAJSONObjectInTheDefaultOutput(t *testing.T) {
	var out bytes.Buffer
	prevOut, prevFlags := log.Writer(), log.Flags()
	log.SetOutput(&out) // where slog's default handler writes
	t.Cleanup(func() { log.SetOutput(prevOut); log.SetFlags(prevFlags) })

	m, err := lifecycle.New(lifecycle.Config{Service: "api", NodeID: "n1"})
	require.NoError(t, err)
	require.NoError(t, m.AddHook(drain.Hook{Name: "api.close", Phase: drain.Close, Run: func(context.Context) error { return nil }}))
	require.NoError(t, m.MarkRunning())
	m.Shutdown(context.Background(), "test")

	var line string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.Contains(l, "drain report") {
			line = l
		}
	}
	require.NotEmpty(t, line, "no drain report line in:\n%s", out.String())
	var rec struct {
		Msg    string         `json:"msg"`
		Report map[string]any `json:"report"`
	}
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("report line %s: %v; want one JSON object", line, err)
	}
	assert.Equal(t, "drain report", rec.Msg)
	assert.Equal(t, "api", rec.Report["service"])
	hooks, _ := rec.Report["hooks"].([]any)
	require.Len(t, hooks, 1, "report %v", rec.Report)
	assert.Equal(t, "api.close", hooks[0].(map[string]any)["name"])
	assert.Contains(t, out.String(), "drain phase", "the other lines stay in the default handler's text")
}

// The phase lines name the phase under the key the report uses, "phase",
// and together count every entry the report lists for each phase: the
// results of the work after the drain (fx's OnStop hooks) included, and
// the hooks of phases a forced drain skipped.
func TestPhaseLinesCountWhatTheReportLists(t *testing.T) {
	tests := []struct {
		name  string
		force bool // a second signal while wait_in_flight runs
	}{
		{"clean", false},
		{"forced", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, lifecycle.Config{Service: "api", NodeID: "n1", DrainDelay: time.Second})
				noop := func(context.Context) error { return nil }
				wait := func(ctx context.Context) error {
					if tt.force {
						h.sig <- syscall.SIGTERM
						<-ctx.Done()
						return ctx.Err()
					}
					return nil
				}
				require.NoError(t, h.AddHook(
					drain.Hook{Name: "api.stop_intake", Phase: drain.StopIntake, Run: noop},
					drain.Hook{Name: "api.wait_in_flight", Phase: drain.WaitInFlight, Run: wait},
					drain.Hook{Name: "api.close", Phase: drain.Close, Run: noop},
					drain.Hook{Name: "readiness.close", Phase: drain.Close, Run: noop},
				))
				h.Manager.OnDrained(func() []drain.HookResult {
					return []drain.HookResult{{Name: "fx.OnStop main.closeRedis", Phase: drain.Close, Outcome: drain.OK}}
				})
				reports := h.run()
				synctest.Wait()
				h.sig <- syscall.SIGTERM
				r := <-reports
				require.Equal(t, tt.force, r.Forced)

				want := map[string]int{}
				for _, hr := range r.Hooks {
					want[string(hr.Phase)]++
				}
				got := map[string]int{}
				for _, line := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
					var rec map[string]any
					require.NoError(t, json.Unmarshal([]byte(line), &rec))
					switch rec["msg"] {
					case "drain phase", "drain phase skipped", "after-drain hooks":
					default:
						continue
					}
					assert.NotContains(t, rec, "stage", "the key is phase, as in the report: %s", line)
					phase, _ := rec["phase"].(string)
					n, _ := rec["hooks"].(float64)
					got[phase] += int(n)
				}
				assert.Equal(t, map[string]int{"stop_intake": 1, "wait_in_flight": 1, "close": 3}, want)
				if !assert.Equal(t, want, got, "hooks per phase: got the log lines' sums; want the report's entries") {
					t.Logf("log:\n%s", h.logs.String())
				}
			})
		})
	}
}

// The report line places each hook from the stop request, the report's
// start: a reader learns when intake stopped, the propagation delay
// included, from that line alone.
func TestReportLineSaysWhenEachHookBegan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, lifecycle.Config{Service: "api", NodeID: "n1", DrainDelay: time.Second})
		noop := func(context.Context) error { return nil }
		require.NoError(t, h.AddHook(drain.Hook{Name: "api.stop_intake", Phase: drain.StopIntake, Run: noop}))
		reports := h.run()
		synctest.Wait()
		h.sig <- syscall.SIGTERM
		<-reports
		hooks, _ := reportLine(t, h.logs.String())["report"].(map[string]any)["hooks"].([]any)
		require.Len(t, hooks, 1)
		hook, _ := hooks[0].(map[string]any)
		assert.Equal(t, 1000.0, hook["start_ms"], "api.stop_intake began after DRAIN_DELAY: %v", hook)
	})
}

// Stop requests that race one another and the drain (Shutdowns and a force
// from other goroutines) must not race the phase lines' read of when the
// first stop came (run with -race): every line's elapsed_ms counts from it.
func TestPhaseLinesCountFromTheFirstStopWhileStopsRace(t *testing.T) {
	h := newHarness(t, lifecycle.Config{Service: "api", NodeID: "n1"})
	noop := func(context.Context) error { return nil }
	for _, p := range []drain.Phase{drain.StopIntake, drain.WaitInFlight, drain.Flush, drain.Release, drain.Close} {
		require.NoError(t, h.AddHook(drain.Hook{Name: "api." + string(p), Phase: p, Run: noop}))
	}
	reports := make(chan *lifecycle.Report, 4)
	var stops sync.WaitGroup
	for i := range cap(reports) {
		stops.Go(func() { reports <- h.Shutdown(context.Background(), fmt.Sprintf("stop %d", i)) })
	}
	stops.Go(func() { h.Force("force") })
	stops.Wait()
	close(reports)
	first := <-reports
	for r := range reports {
		assert.Same(t, first, r, "every Shutdown returns the first one's report")
	}
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if rec["msg"] != "drain phase" && rec["msg"] != "drain phase skipped" {
			continue
		}
		lines++
		elapsed, _ := rec["elapsed_ms"].(float64)
		assert.GreaterOrEqual(t, elapsed, 0.0, "elapsed_ms of %s", line)
		assert.LessOrEqual(t, elapsed, float64(first.Duration.Microseconds())/1000, "elapsed_ms of %s: got more than the whole drain took", line)
	}
	assert.Positive(t, lines, "phase lines")
}

// Run states the drain timing in effect in one line before anything
// starts.
func TestRunStatesTheDrainTiming(t *testing.T) {
	var out bytes.Buffer
	cfg := lifecycle.Config{Service: "api", NodeID: "n1", DrainTimeout: 20 * time.Second, DrainDelay: 8 * time.Second,
		QuietWindow: 2 * time.Second, DelayFloor: 3 * time.Second, Logger: slog.New(slog.NewJSONHandler(&out, nil))}
	m, err := lifecycle.New(cfg)
	require.NoError(t, err)
	m.OnStart(func(context.Context) error { return errors.New("no start needed") })
	m.Run(context.Background())

	var timing map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "log line %s", l)
		if rec["msg"] == "drain timing" {
			require.Nil(t, timing, "a second drain timing line: %s", l)
			timing = rec
		}
	}
	require.NotNil(t, timing, "no drain timing line in:\n%s", out.String())
	for k, want := range map[string]string{"drain_timeout": "20s", "drain_delay": "8s", "drain_quiet_window": "2s", "drain_delay_floor": "3s"} {
		assert.Equal(t, want, timing[k], "%s in the drain timing line", k)
	}
}

// Once running, one line names the hooks each phase of the drain will run,
// in the order added, every phase named: an empty flush is how a forgotten
// flush hook shows before a rollout loses what it would have written.
func TestRunningSaysWhichHooksEachPhaseRuns(t *testing.T) {
	var out bytes.Buffer
	m, err := lifecycle.New(lifecycle.Config{Service: "api", NodeID: "n1", Logger: slog.New(slog.NewJSONHandler(&out, nil))})
	require.NoError(t, err)
	nop := func(context.Context) error { return nil }
	require.NoError(t, m.AddHook(
		drain.Hook{Name: "api.stop_intake", Phase: drain.StopIntake, Run: nop},
		drain.Hook{Name: "db.close", Phase: drain.Close, Run: nop},
		drain.Hook{Name: "api.wait", Phase: drain.WaitInFlight, Run: nop},
		drain.Hook{Name: "redis.close", Phase: drain.Close, Run: nop},
	))
	require.NoError(t, m.MarkRunning())

	var hooks []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "log line %s", l)
		if rec["msg"] == "drain hooks" {
			hooks = append(hooks, rec)
		}
	}
	require.Len(t, hooks, 1, "drain hooks lines in:\n%s", out.String())
	for k, want := range map[string]string{"service": "api", "node_id": "n1", "stop_intake": "api.stop_intake",
		"wait_in_flight": "api.wait", "flush": "", "release": "", "close": "db.close,redis.close"} {
		assert.Equal(t, want, hooks[0][k], "%s in the drain hooks line", k)
	}
}

// The report's JSON keeps every count exact, the drain report's nested in
// its hooks too: one that went through a float64 on the way would come out
// rounded above 2^53.
func TestReportJSONKeepsCountsExact(t *testing.T) {
	hook := drain.HookResult{Name: "streams", Phase: drain.WaitInFlight, Streams: &drain.StreamReport{Told: 1<<53 + 1}}
	r := &lifecycle.Report{Report: &drain.Report{Reason: "test", Hooks: []drain.HookResult{hook}}, Service: "api",
		ArrivedAfterFlip: 1<<64 - 1}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"told":9007199254740993`, "report %s", b)
	assert.Contains(t, string(b), `"after_flip":18446744073709551615`, "report %s", b)
}

// A Report without a drain report (built by hand) still marshals to one
// valid JSON object: its own fields.
func TestReportJSONWithoutADrainReport(t *testing.T) {
	b, err := json.Marshal(&lifecycle.Report{Service: "api", ExitCode: 1})
	require.NoError(t, err)
	require.True(t, json.Valid(b), "not JSON: %s", b)
	assert.Contains(t, string(b), `"service":"api"`)
}
