package fxmodule_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/drain"
	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/fxmodule/fxmoduletest"
	"github.com/drainkit/drainkit/lifecycle"
)

// prober asks /healthz/live at each address in turn, over and over, as a
// kubelet does: a new connection each time, so a closed listener shows.
type prober struct {
	addrs  []string
	client *http.Client
	state  func() lifecycle.State

	mu      sync.Mutex
	results []probeResult
	roundUp chan struct{} // closed at the end of each round, then replaced
	quit    chan struct{}
	done    chan struct{}
}

type probeResult struct {
	addr  string
	state lifecycle.State // when the probe was sent
	code  int
	err   error
}

func newProber(addrs []string) *prober {
	return &prober{
		addrs:   addrs,
		client:  &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second},
		roundUp: make(chan struct{}),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

func (p *prober) run() {
	defer close(p.done)
	for {
		for _, addr := range p.addrs {
			r := probeResult{addr: addr, state: p.state()}
			r.code, r.err = status(p.client, "http://"+addr+"/healthz/live")
			p.mu.Lock()
			p.results = append(p.results, r)
			p.mu.Unlock()
		}
		p.mu.Lock()
		close(p.roundUp)
		p.roundUp = make(chan struct{})
		p.mu.Unlock()
		select {
		case <-p.quit:
			return
		default:
		}
	}
}

// round returns once a whole round of probes begun after the call ended.
func (p *prober) round(ctx context.Context) error {
	for range 2 { // the end of the round in progress, then of a whole one
		p.mu.Lock()
		up := p.roundUp
		p.mu.Unlock()
		select {
		case <-up:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// stop ends the probing and waits for the last probe.
func (p *prober) stop() {
	close(p.quit)
	<-p.done
	p.client.CloseIdleConnections()
}

func status(c *http.Client, url string) (int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// Liveness answers 200 through the whole drain in every wiring: HTTP
// alone (its probes beside the API), HTTP with Admin, and Admin alone. A
// prober asks continuously, on new connections, from before the signal
// until the last phase before close; hooks in each phase after stop_intake
// wait for a whole round of probes, so every phase is probed.
func TestLivenessAnswersThroughTheDrain(t *testing.T) {
	tests := []struct {
		name        string
		http, admin bool
	}{
		{name: "HTTP alone", http: true},
		{name: "HTTP and Admin", http: true, admin: true},
		{name: "Admin alone", admin: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			apiAddr, adminAddr := freeAddr(t), freeAddr(t)
			var opts []fx.Option
			var addrs []string
			if tt.http {
				hello := func() http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") })
				}
				opts, addrs = append(opts, fxmodule.HTTP("api", apiAddr, hello)), append(addrs, apiAddr)
			}
			if tt.admin {
				opts, addrs = append(opts, fxmodule.Admin(adminAddr)), append(addrs, adminAddr)
			}
			p := newProber(addrs)
			var afterIntake struct{ api, ready int }
			probeHook := func(name string, phase drain.Phase) drain.Hook {
				return drain.Hook{Name: name, Phase: phase, Run: p.round}
			}
			hooks := fx.Provide(fxmodule.AsHook(func() []drain.Hook {
				return []drain.Hook{
					{Name: "probe.wait_in_flight", Phase: drain.WaitInFlight, Run: func(ctx context.Context) error {
						c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
						defer c.CloseIdleConnections()
						afterIntake.ready, _ = status(c, "http://"+addrs[0]+"/healthz/ready")
						if tt.http {
							afterIntake.api, _ = status(c, "http://"+apiAddr+"/")
						}
						return p.round(ctx)
					}},
					probeHook("probe.flush", drain.Flush),
					// The last probes, then none: phase close shuts the listeners.
					{Name: "probe.release", Phase: drain.Release, Run: func(ctx context.Context) error {
						defer p.stop()
						return p.round(ctx)
					}},
				}
			}))
			app := fxmoduletest.Start(t, baseOptions(&trace{}, append(opts, hooks)...)...)
			p.state = app.Manager().State
			go p.run()
			require.NoError(t, p.round(context.Background()))
			app.Signal()
			r := app.Wait()
			assert.Equal(t, lifecycle.ExitClean, r.ExitCode, "%+v", r.Hooks)

			p.mu.Lock()
			defer p.mu.Unlock()
			draining := 0
			for _, res := range p.results {
				if res.state == lifecycle.Draining {
					draining++
				}
				if res.err != nil || res.code != http.StatusOK {
					t.Errorf("live at %s while %s: got %d, %v; want 200", res.addr, res.state, res.code, res.err)
				}
			}
			assert.GreaterOrEqual(t, draining, 3*len(addrs), "probed in each phase of the drain")
			assert.Equal(t, http.StatusServiceUnavailable, afterIntake.ready, "ready after stop_intake")
			if tt.http {
				assert.Equal(t, http.StatusServiceUnavailable, afterIntake.api, "the API after stop_intake")
			}
		})
	}
}

// HTTP's listener closes in phase close: nothing answers once the drain
// is over.
func TestHTTPClosesItsListenerInPhaseClose(t *testing.T) {
	addr := freeAddr(t)
	hello := func() http.Handler { return http.NotFoundHandler() }
	app := fxmoduletest.Start(t, baseOptions(&trace{}, fxmodule.HTTP("api", addr, hello))...)
	r := app.Stop()
	assert.Equal(t, lifecycle.ExitClean, r.ExitCode)
	for _, name := range []string{"api.stop_intake", "api.wait_in_flight", "api.close", "api.serve"} {
		h, ok := r.Hook(name)
		if assert.True(t, ok, name) {
			assert.Equal(t, drain.OK, h.Outcome, name)
		}
	}
	closeHook, _ := r.Hook("api.close")
	assert.Equal(t, drain.Close, closeHook.Phase)
	_, err := status(http.DefaultClient, fmt.Sprintf("http://%s/healthz/live", addr))
	assert.Error(t, err, "the listener is closed")
}
