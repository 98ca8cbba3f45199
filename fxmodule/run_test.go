package fxmodule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"google.golang.org/grpc"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxgrpc"
	"github.com/drainkit/drainkit/fxmodule/fxlease"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/internal/testlog"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
)

// record is one line of the default logger, as a JSON handler wrote it.
type record struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	Err   string `json:"err"`
}

// logDefault sends the default logger, where Run logs what it refuses and
// where fx logs when the graph has no logger, to a buffer for the test;
// the returned function reads its records.
func logDefault(t *testing.T) func() []record {
	t.Helper()
	logs := &testlog.Buffer{}
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	slog.SetDefault(slog.New(slog.NewJSONHandler(logs, nil)))
	return func() []record {
		var out []record
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var r record
			if line != "" && json.Unmarshal([]byte(line), &r) == nil {
				out = append(out, r)
			}
		}
		return out
	}
}

func errorLines(recs []record) []string {
	var out []string
	for _, r := range recs {
		if r.Level == "ERROR" {
			out = append(out, strings.TrimSpace(r.Msg+" "+r.Err))
		}
	}
	return out
}

// dbConfig stands for a service's own configuration, read by its own
// constructor.
type dbConfig struct{}

func newDBConfig() (*dbConfig, error) {
	return nil, fmt.Errorf("%w: DATABASE_URL is empty; set it to the database's DSN", lifecycle.ErrConfig)
}

func namedHook(name string) any {
	return fxmodule.AsHook(func() drain.Hook {
		return drain.Hook{Name: name, Phase: drain.Flush, Run: func(context.Context) error { return nil }}
	})
}

// Every configuration mistake found before the start exits 78 with one
// line that says what to change, not fx's wrapping of it.
func TestRunConfigMistakeIsOneLineAndExitConfig(t *testing.T) {
	hello := func() http.Handler { return http.NotFoundHandler() }
	cfg := fx.Supply(lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 10 * time.Second})
	tests := []struct {
		name string
		env  map[string]string
		give []fx.Option
		want []string // each in the one line
		// fxWords: a mistake in the graph, said in fx's own words (which
		// name the type), since dig's text is not dig's API to rewrite.
		fxWords bool
	}{
		{
			name: "a bad variable",
			env:  map[string]string{"DRAIN_TIMEOUT": "abc"},
			give: []fx.Option{fxmodule.Module, fxmodule.FromEnv},
			want: []string{`DRAIN_TIMEOUT="abc": not a duration`},
		},
		{
			name: "a bad lifecycle.Config",
			give: []fx.Option{fxmodule.Module, fx.Supply(lifecycle.Config{DrainTimeout: time.Second, DrainDelay: 2 * time.Second})},
			want: []string{`DrainDelay="2s": must be shorter than DrainTimeout (1s)`},
		},
		{
			name: "a constructor's error wrapping lifecycle.ErrConfig",
			give: []fx.Option{fxmodule.Module, cfg, fx.Provide(newDBConfig), fx.Invoke(func(*dbConfig) {})},
			want: []string{"DATABASE_URL is empty; set it to the database's DSN"},
		},
		{
			name: "HTTP without a name",
			give: []fx.Option{fxmodule.Module, cfg, fxmodule.HTTP("", "127.0.0.1:0", hello)},
			want: []string{`fxmodule: HTTP("", "127.0.0.1:0", …): name is empty; want the server's name, such as "api"`},
		},
		{
			name: "HTTP's handler constructor returning nil",
			give: []fx.Option{fxmodule.Module, cfg, fxmodule.HTTP("api", "127.0.0.1:0", func() http.Handler { return nil })},
			want: []string{`fxmodule.HTTP("api", "127.0.0.1:0", …): the handler is nil`},
		},
		{
			name: "two hooks with one name",
			give: []fx.Option{fxmodule.Module, cfg, fx.Provide(namedHook("flush"), namedHook("flush"))},
			want: []string{`two drain hooks named "flush"`},
		},
		{
			name: "the app's hook named like one of HTTP's",
			give: []fx.Option{fxmodule.Module, cfg, fx.Provide(namedHook("api.serve")), fxmodule.HTTP("api", "127.0.0.1:0", hello)},
			want: []string{`drain hook "api.serve"`, `fxmodule.HTTP("api", "127.0.0.1:0", …)`},
		},
		{
			name: "HTTP's hook named like the app's, HTTP first",
			give: []fx.Option{fxmodule.HTTP("api", "127.0.0.1:0", hello), fxmodule.Module, cfg, fx.Provide(namedHook("api.serve"))},
			want: []string{`drain hook "api.serve"`, `fxmodule.HTTP("api", "127.0.0.1:0", …)`},
		},
		{
			// The group's only reader takes drain.Hooks: fx would never call
			// this constructor, and the hook would be missing from the drain.
			name: "AsHook of a constructor returning a *drain.Hook",
			give: []fx.Option{fxmodule.Module, cfg, fx.Provide(fxmodule.AsHook(func() *drain.Hook { return &drain.Hook{} }))},
			want: []string{`fxmodule.AsHook(func() *drain.Hook): the constructor's first result must be a drain.Hook or a []drain.Hook`},
		},
		{
			// fx.ResultTags tags the first result only: the second hook would
			// be provided on its own and never join the drain.
			name: "AsHook of a constructor returning two hooks",
			give: []fx.Option{fxmodule.Module, cfg, fx.Provide(fxmodule.AsHook(func() (drain.Hook, drain.Hook) { return drain.Hook{}, drain.Hook{} }))},
			want: []string{`fxmodule.AsHook(func() (drain.Hook, drain.Hook)): only the first result joins the drain; return a []drain.Hook for several`},
		},
		{
			name: "AsHook of a constructor returning an error first",
			//lint:ignore ST1008 the mistake under test
			give: []fx.Option{fxmodule.Module, cfg, fx.Provide(fxmodule.AsHook(func() (error, drain.Hook) { return nil, drain.Hook{} }))},
			want: []string{`fxmodule.AsHook(func() (error, drain.Hook)): the constructor's first result must be a drain.Hook or a []drain.Hook`},
		},
		{
			name: "AsHook of a constructor returning nothing",
			give: []fx.Option{fxmodule.Module, cfg, fx.Provide(fxmodule.AsHook(func() {}))},
			want: []string{`fxmodule.AsHook(func()): the constructor's first result must be a drain.Hook or a []drain.Hook`},
		},
		{
			name: "AsHook of a hook",
			give: []fx.Option{fxmodule.Module, cfg, fx.Provide(fxmodule.AsHook(drain.Hook{Name: "flush"}))},
			want: []string{`fxmodule.AsHook(drain.Hook): want a constructor returning a drain.Hook or a []drain.Hook, such as func() drain.Hook`},
		},
		{
			name: "AsCheck of a constructor returning a *readiness.Check",
			give: []fx.Option{fxmodule.Module, cfg, fx.Provide(fxmodule.AsCheck(func() *readiness.Check { return &readiness.Check{} }))},
			want: []string{`fxmodule.AsCheck(func() *readiness.Check): the constructor's first result must be a readiness.Check`},
		},
		{
			name: "AsCheck of a check",
			give: []fx.Option{fxmodule.Module, cfg, fx.Provide(fxmodule.AsCheck(readiness.Check{Name: "db"}))},
			want: []string{`fxmodule.AsCheck(readiness.Check): want a constructor returning a readiness.Check or a []readiness.Check, such as func() readiness.Check`},
		},
		{
			name: "two servers named api",
			give: []fx.Option{fxmodule.Module, cfg, fxmodule.HTTP("api", "127.0.0.1:0", hello), fxmodule.HTTP("api", "127.0.0.1:0", hello)},
			want: []string{`two servers named "api"`},
		},
		{
			name: "an HTTP address without a port",
			give: []fx.Option{fxmodule.Module, cfg, fxmodule.HTTP("api", "not-an-addr", hello)},
			want: []string{`fxmodule: HTTP("api", "not-an-addr", …): address not-an-addr: missing port in address`},
		},
		{
			name: "a nil HTTP handler",
			give: []fx.Option{fxmodule.Module, cfg, fxmodule.HTTP("api", "127.0.0.1:0", nil)},
			want: []string{`fxmodule: HTTP("api", "127.0.0.1:0", handler): handler is nil`},
		},
		{
			name: "an HTTP handler given for its constructor",
			give: []fx.Option{fxmodule.Module, cfg, fxmodule.HTTP("api", "127.0.0.1:0", http.NotFound)},
			want: []string{`fxmodule: HTTP("api", "127.0.0.1:0", handler): handler is a func(http.ResponseWriter, *http.Request), which returns no http.Handler`},
		},
		{
			name: "an HTTP handler value given for its constructor",
			give: []fx.Option{fxmodule.Module, cfg, fxmodule.HTTP("api", "127.0.0.1:0", http.NewServeMux())},
			want: []string{`fxmodule: HTTP("api", "127.0.0.1:0", handler): handler is a *http.ServeMux, a handler; want a constructor`},
		},
		{
			name: "an Admin port out of range",
			give: []fx.Option{fxmodule.Module, cfg, fxmodule.Admin("127.0.0.1:99999")},
			want: []string{`fxmodule: Admin("127.0.0.1:99999"): address 99999: invalid port`},
		},
		{
			name: "Admin twice",
			give: []fx.Option{fxmodule.Module, cfg, fxmodule.Admin("127.0.0.1:0"), fxmodule.Admin("127.0.0.1:0")},
			want: []string{`two servers named "admin"`},
		},
		{
			name:    "fx.StopTimeout inside a module",
			give:    []fx.Option{fxmodule.Module, cfg, fx.Module("m", fx.StopTimeout(time.Minute))},
			want:    []string{"fx.StopTimeout Option should be passed to top-level App"},
			fxWords: true,
		},
		{
			name: "fxmodule.Module forgotten",
			give: []fx.Option{fxmodule.FromEnv, fxmodule.HTTP("api", "127.0.0.1:0", hello)},
			want: []string{`fxmodule.HTTP("api", "127.0.0.1:0", …) needs fxmodule.Module`},
		},
		{
			// fx hands the server's constructor a nil Manager, as without the Module.
			name: "the lifecycle.Config forgotten, a server given before the Module",
			give: []fx.Option{fxmodule.HTTP("api", "127.0.0.1:0", hello), fxmodule.Module},
			want: []string{`fxmodule.HTTP("api", "127.0.0.1:0", …) needs fxmodule.Module and a lifecycle.Config (fxmodule.FromEnv`},
		},
		{
			name:    "the lifecycle.Config forgotten",
			give:    []fx.Option{fxmodule.Module, fxmodule.HTTP("api", "127.0.0.1:0", hello)},
			want:    []string{"missing type: lifecycle.Config"},
			fxWords: true,
		},
		{
			// Run decorates both at the root, and fx allows one decoration.
			name:    "the app's own root decoration of fx.Lifecycle",
			give:    []fx.Option{fxmodule.Module, cfg, fx.Decorate(func(lc fx.Lifecycle) fx.Lifecycle { return lc })},
			want:    []string{"fx.Lifecycle"},
			fxWords: true,
		},
		{
			name:    "the app's own root decoration of fx.Shutdowner",
			give:    []fx.Option{fxmodule.Module, cfg, fx.Decorate(func(s fx.Shutdowner) fx.Shutdowner { return s })},
			want:    []string{"fx.Shutdowner"},
			fxWords: true,
		},
		{
			name:    "a type nobody provides",
			give:    []fx.Option{fxmodule.Module, cfg, fx.Invoke(func(*dbConfig) {})},
			want:    []string{"missing type: *fxmodule_test.dbConfig"},
			fxWords: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			logs := logDefault(t)
			code := fxmodule.Run(tt.give...)
			assert.Equal(t, lifecycle.ExitConfig, code, "exit code")
			lines := errorLines(logs())
			require.Len(t, lines, 1, "one error line; got %q", lines)
			t.Log(lines[0])
			for _, w := range tt.want {
				assert.Contains(t, lines[0], w)
			}
			if tt.fxWords {
				return
			}
			for _, wrapping := range []string{"\n", "could not build arguments", "received non-nil error", "did you mean to Provide"} {
				assert.NotContains(t, lines[0], wrapping, "fx's wrapping")
			}
		})
	}
}

// A refusal to build goes to the graph's *slog.Logger when fx could build
// it, as every other line of Run does: a JSON log pipeline must not miss,
// or mangle, the one line that explains a crash loop (a new user's trial
// found it written as text by the default logger). A logger fx could not
// build leaves the default.
func TestRunRefusalGoesToTheGraphsLogger(t *testing.T) {
	defaults := logDefault(t)
	var graph testlog.Buffer
	code := fxmodule.Run(fxmodule.Module, fx.Supply(slog.New(slog.NewJSONHandler(&graph, nil))),
		fx.Supply(lifecycle.Config{DrainTimeout: time.Second, DrainDelay: 2 * time.Second}))
	assert.Equal(t, lifecycle.ExitConfig, code, "exit code")
	assert.Contains(t, graph.String(), `DrainDelay=\"2s\": must be shorter than DrainTimeout`, "the graph's logger")
	assert.Empty(t, errorLines(defaults()), "error lines of the default logger")
}

// The same mistake gives the same exit code on every path: an app's own
// check named like the one a server option or fxlease adds is refused
// with 78 and one line naming the check, whichever added it second.
func TestRunSameCheckNameTwiceIsExitConfigOnEveryPath(t *testing.T) {
	cfg := fx.Supply(lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 10 * time.Second})
	check := func(name string) fx.Option {
		return fx.Provide(fxmodule.AsCheck(func() readiness.Check {
			return readiness.Check{Name: name, Tier: readiness.Gating, Probe: func(context.Context) error { return nil }}
		}))
	}
	hello := func() http.Handler { return http.NotFoundHandler() }
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1, ContextTimeoutEnabled: true}) // never dialled
	t.Cleanup(func() { _ = client.Close() })
	redisClient := fx.Supply(fx.Annotate(client, fx.As(new(redis.UniversalClient))))
	tests := []struct {
		name  string
		give  []fx.Option
		check string
	}{
		{name: "fxmodule.HTTP", give: []fx.Option{fxmodule.HTTP("api", "127.0.0.1:0", hello)}, check: "api_listener"},
		{name: "fxgrpc.Server", give: []fx.Option{fxgrpc.Server("api", "127.0.0.1:0", func(*grpc.Server) {})}, check: "api_listener"},
		{name: "fxlease.Module", give: []fx.Option{fxlease.Module, redisClient}, check: "redis_lease"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := logDefault(t)
			opts := append([]fx.Option{fxmodule.Module, cfg, check(tt.check)}, tt.give...)
			assert.Equal(t, lifecycle.ExitConfig, fxmodule.Run(opts...), "exit code")
			lines := errorLines(logs())
			require.Len(t, lines, 1, "one error line; got %q", lines)
			assert.Contains(t, lines[0], fmt.Sprintf("readiness: two checks named %q: give each its own name", tt.check))
		})
	}
}

// A start that fails on the world (here a port already taken) is not a
// configuration mistake: it exits 5.
func TestRunStartFailingOnTheWorldIsExitStartFailed(t *testing.T) {
	taken := freeAddr(t)
	ln, err := net.Listen("tcp", taken)
	require.NoError(t, err)
	defer ln.Close()
	hello := func() http.Handler { return http.NotFoundHandler() }
	code := fxmodule.Run(baseOptions(&trace{}, fxmodule.HTTP("api", taken, hello))...)
	assert.Equal(t, lifecycle.ExitStartFailed, code)
}

// Started with DRAIN_TIMEOUT=120s and no other setting (no SERVICE_NAME,
// no fx.StopTimeout), an app runs and drains: the drain has its 120 s,
// and the OnStop hooks after it fx's default StopTimeout.
func TestRunWithDrainTimeoutAloneRunsAndDrains(t *testing.T) {
	for _, k := range []string{"SERVICE_NAME", "NODE_ID", "DRAIN_DELAY", "DRAIN_QUIET_WINDOW", "DRAIN_DELAY_FLOOR", "HEALTH_READY_TIMEOUT"} {
		t.Setenv(k, "")
	}
	t.Setenv("DRAIN_TIMEOUT", "120s")
	synctest.Test(t, func(t *testing.T) {
		var budget time.Duration
		measure := fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.Hook{OnStop: func(ctx context.Context) error {
				d, _ := ctx.Deadline()
				budget = time.Until(d)
				return nil
			}})
		})
		a := fxmoduletest.Start(t, fxmodule.Module, fxmodule.FromEnv, fx.Supply(quiet()), measure)
		r := a.Stop()
		assert.Equal(t, lifecycle.ExitClean, r.ExitCode)
		assert.Equal(t, "fxmodule.test", r.Service, "named after the executable")
		assert.Equal(t, fx.DefaultTimeout, budget, "fx's default StopTimeout")
	})
}

// A service run without a name is named after its executable, and says
// so once at the start.
func TestRunWithoutServiceNameLogsTheDefault(t *testing.T) {
	t.Setenv("SERVICE_NAME", "")
	t.Setenv("DRAIN_DELAY", "0s")
	logs := logDefault(t)
	a := fxmoduletest.Start(t, fxmodule.Module, fxmodule.FromEnv)
	r := a.Stop()
	assert.Equal(t, lifecycle.ExitClean, r.ExitCode)
	assert.Equal(t, "fxmodule.test", r.Service)
	var said []string
	for _, rec := range logs() {
		if strings.Contains(rec.Msg, "SERVICE_NAME") {
			said = append(said, rec.Msg)
		}
	}
	assert.Len(t, said, 1, "one line says the name was not given: %q", said)
}

// A node run without NODE_ID is named after the host, and says so once at
// the start: two processes on one host would share it (and a lease
// session), and the one that waits should not be the first to tell.
func TestRunWithoutNodeIDLogsTheDefault(t *testing.T) {
	t.Setenv("NODE_ID", "")
	t.Setenv("DRAIN_DELAY", "0s")
	host, err := os.Hostname()
	require.NoError(t, err)
	logs := logDefault(t)
	a := fxmoduletest.Start(t, fxmodule.Module, fxmodule.FromEnv)
	r := a.Stop()
	assert.Equal(t, lifecycle.ExitClean, r.ExitCode)
	assert.Equal(t, host, r.NodeID)
	var said []string
	for _, rec := range logs() {
		if strings.Contains(rec.Msg, "NODE_ID") {
			said = append(said, rec.Msg)
		}
	}
	assert.Len(t, said, 1, "one line says the node id was not given: %q", said)
}
