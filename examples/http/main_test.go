package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A rolling update's drain: ready answers 503 from the flip, liveness 200
// on every probe until phase release (back to back, each on a connection
// of its own as the kubelet's are), the store flushes, and the exit code
// is 0.
func TestDrainKeepsLivenessAndExitsClean(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) string {
		resp, err := probe.Get("http://" + addr + path)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return fmt.Sprint(resp.StatusCode)
	}

	var answers []string // liveness, probe by probe
	stopProbing, probed := make(chan struct{}), make(chan struct{})
	release := drain.Hook{Name: "test.release", Phase: drain.Release, Run: func(context.Context) error {
		close(stopProbing)
		<-probed // no probe runs into phase close, where the servers shut
		// and one more, surely after stop_intake, wait_in_flight and flush
		answers = append(answers, get("/healthz/live"))
		return nil
	}}
	cfg := lifecycle.Config{Service: "http", DrainDelay: 100 * time.Millisecond}
	app := fxmoduletest.Start(t, fx.Supply(cfg), service(addr),
		fx.Provide(fxmodule.AsHook(func() drain.Hook { return release })))
	require.Equal(t, "200", get("/hello"))

	draining := make(chan struct{})
	app.Manager().OnTransition(func(tr lifecycle.Transition) {
		if tr.To == lifecycle.Draining {
			close(draining)
		}
	})
	go func() {
		defer close(probed)
		for {
			select {
			case <-stopProbing:
				return
			default:
				answers = append(answers, get("/healthz/live"))
			}
		}
	}()
	app.Signal()
	<-draining
	assert.Equal(t, "503", get("/healthz/ready"), "ready fails on the first probe after the flip")
	r := app.Wait()

	<-probed
	assert.NotEmpty(t, answers)
	for i, a := range answers {
		require.Equal(t, "200", a, "liveness probe %d of %d", i+1, len(answers))
	}
	assert.Equal(t, lifecycle.ExitClean, r.ExitCode, "%+v", r.Hooks)
	flush, ok := r.Hook("store.flush")
	require.True(t, ok)
	assert.Equal(t, drain.OK, flush.Outcome)
}
