package fxmodule_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/internal/testlog"
	"github.com/drainkit/drainkit/lifecycle"
)

// get returns the status code and body of GET url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// Admin answers probes and scrapes through the whole drain (ready turns
// 503, live stays 200) and closes only in phase close.
func TestAdminAnswersThroughDrain(t *testing.T) {
	addr := freeAddr(t)
	inDrain, release := make(chan struct{}), make(chan struct{})
	blocker := fx.Provide(fxmodule.AsHook(func() drain.Hook {
		return drain.Hook{Name: "blocker", Phase: drain.WaitInFlight, Run: func(context.Context) error {
			close(inDrain)
			<-release
			return nil
		}}
	}))
	reg := prometheus.NewRegistry()
	registerer := fx.Provide(func() prometheus.Registerer { return reg })
	app := fxmoduletest.Start(t, baseOptions(&trace{}, registerer, blocker, fxmodule.Admin(addr))...)

	code, _ := get(t, "http://"+addr+"/healthz/ready")
	assert.Equal(t, http.StatusOK, code, "ready while running")

	app.Signal()
	<-inDrain
	code, _ = get(t, "http://"+addr+"/healthz/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code, "ready during the drain")
	code, _ = get(t, "http://"+addr+"/healthz/live")
	assert.Equal(t, http.StatusOK, code, "live during the drain")
	code, body := get(t, "http://"+addr+"/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "service_draining 1", "the scrape shows what drainkit registered")
	close(release)

	r := app.Wait()
	assert.Equal(t, lifecycle.ExitClean, r.ExitCode)
	for _, h := range []string{"admin.serve"} {
		got, ok := r.Hook(h)
		require.True(t, ok, h)
		assert.Equal(t, drain.Close, got.Phase, h)
		assert.Equal(t, drain.OK, got.Outcome, h)
	}
	_, err := net.Dial("tcp", addr)
	assert.Error(t, err, "the drain closed the admin listener")
}

// Without a Gatherer in the graph there is no /metrics; the probes work.
func TestAdminWithoutRegistry(t *testing.T) {
	addr := freeAddr(t)
	app := fxmoduletest.Start(t, baseOptions(&trace{}, fxmodule.Admin(addr))...)
	code, _ := get(t, "http://"+addr+"/healthz/live")
	assert.Equal(t, http.StatusOK, code)
	code, _ = get(t, "http://"+addr+"/metrics")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, lifecycle.ExitClean, app.Stop().ExitCode)
}

// The start-up says what it does: Admin without /metrics says so (a
// scraper's 404 is not where an operator should learn it), and Run when
// the process will have exited after a signal.
func TestStartUpSaysWhatAdminServesAndWhenTheProcessExits(t *testing.T) {
	var logs testlog.Buffer
	addr, apiAddr := freeAddr(t), freeAddr(t)
	app := fxmoduletest.Start(t, fxmodule.Module, fxmodule.Admin(addr),
		fxmodule.HTTP("api", apiAddr, func() http.Handler { return http.NotFoundHandler() }),
		fx.Supply(lifecycle.Config{Service: "svc", NodeID: "n1", DrainTimeout: 10 * time.Second},
			slog.New(slog.NewJSONHandler(&logs, nil))))
	assert.Equal(t, lifecycle.ExitClean, app.Stop().ExitCode)
	assert.Contains(t, logs.String(), `"msg":"fxmodule: Admin serves no /metrics`)
	assert.Contains(t, logs.String(), `"msg":"listening","service":"svc","server":"admin","addr":"`+addr+`","paths":"/healthz/live,/healthz/ready"`)
	assert.Contains(t, logs.String(), `"msg":"listening","service":"svc","server":"api","addr":"`+apiAddr+`","paths":"/healthz/live,/healthz/ready,/"`)
	// And the start-up says when the process will have exited, for the pod's grace period.
	assert.Contains(t, logs.String(), `"drain_timeout":"10s","stop_timeout":"15s","exit_within":"25s"`)
}

// freeAddr returns a loopback address with a port free at the time.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
