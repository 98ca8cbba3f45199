package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/drainkit/drainkit/internal/harness"
)

// frontend is the load balancer in front of the instances, as the drill
// drives it: every instance the drill will start has a place in it from
// the beginning, by index.
type frontend interface {
	// name is "haproxy", "inprocess", "kube" or "roundrobin".
	name() string
	// caller is how the load sends through the balancer; the drill closes
	// it before the frontend.
	caller(cfg *drillConfig) (caller, error)
	// admit waits until the balancer sends requests to instance i, which
	// is ready.
	admit(ctx context.Context, i int) error
	// absent waits until the balancer holds instance i out (it has not
	// started).
	absent(ctx context.Context, i int) error
	// terminating says instance i was sent SIGTERM at at, and returns when
	// the balancer stops sending to it, if it knows (kube: at plus the
	// lag); zero when its checks decide.
	terminating(i int, at time.Time) time.Time
	// retries is how many requests the balancer retried itself.
	retries() int
	close()
}

// checkedBalancer is HAProxy or the in-process balancer.
type checkedBalancer interface {
	Name() string
	Addr() string
	WaitServer(ctx context.Context, i int, up bool) error
	Retries() int
	Close()
}

// checked is a balancer that follows the instances' readiness.
type checked struct {
	b      checkedBalancer
	client *http.Client
}

func (f *checked) name() string { return f.b.Name() }
func (f *checked) caller(cfg *drillConfig) (caller, error) {
	return httpCaller{cfg: cfg, baseURL: "http://" + f.b.Addr(), client: f.client}, nil
}
func (f *checked) admit(ctx context.Context, i int) error  { return f.b.WaitServer(ctx, i, true) }
func (f *checked) absent(ctx context.Context, i int) error { return f.b.WaitServer(ctx, i, false) }
func (f *checked) terminating(int, time.Time) time.Time    { return time.Time{} }
func (f *checked) retries() int                            { return f.b.Retries() }
func (f *checked) close()                                  { f.b.Close(); f.client.CloseIdleConnections() }

// kube is a Service as kube-proxy makes it (see [harness.Endpoints]).
type kube struct {
	endpoints harness.Endpoints
	addrs     []string // by instance
	lag       time.Duration
	client    *http.Client
}

func (f *kube) name() string { return "kube" }

// caller sends to a loopback URL, or a gRPC target, whose connections the
// Endpoints place.
func (f *kube) caller(cfg *drillConfig) (caller, error) {
	if cfg.GRPC {
		return f.grpcCaller(cfg)
	}
	return httpCaller{cfg: cfg, baseURL: "http://127.0.0.1", client: f.client}, nil
}
func (f *kube) admit(_ context.Context, i int) error {
	f.endpoints.Add(f.addrs[i])
	return nil
}
func (f *kube) absent(context.Context, int) error { return nil }
func (f *kube) terminating(i int, at time.Time) time.Time {
	leave := at.Add(f.lag)
	f.endpoints.RemoveAt(f.addrs[i], leave)
	return leave
}
func (f *kube) retries() int { return 0 }
func (f *kube) close()       { f.client.CloseIdleConnections() }

// startFrontend starts the balancer cfg.LB asks for in front of every
// instance, in dir.
func startFrontend(ctx context.Context, cfg *drillConfig, dir string, ports *harness.Ports, insts []*instance) (frontend, error) {
	if cfg.LB == "roundrobin" {
		return newRoundRobin(cfg, insts)
	}
	if cfg.LB == "kube" {
		f := &kube{lag: cfg.Lag}
		for _, in := range insts {
			f.addrs = append(f.addrs, in.addr)
		}
		f.client = harness.NewClient(f.endpoints.DialContext)
		return f, nil
	}
	var servers []harness.Server
	checkPath := ""
	for _, in := range insts {
		u, err := url.Parse(in.ready)
		if err != nil {
			return nil, fmt.Errorf("readiness URL %q: %w", in.ready, err)
		}
		checkPath = u.RequestURI()
		servers = append(servers, harness.Server{Name: in.name, Addr: in.addr, CheckAddr: u.Host})
	}
	path, err := harness.HAProxyPath()
	var b checkedBalancer
	switch {
	case cfg.LB == "inprocess" || (cfg.LB == "auto" && err != nil):
		if b, err = harness.StartInProcess(servers, checkPath, ""); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("-lb haproxy: haproxy not found (install it, e.g. apt-get install haproxy, or use -lb inprocess): %w", err)
	default:
		front, err := ports.Pick(1)
		if err != nil {
			return nil, err
		}
		if b, err = harness.StartHAProxy(ctx, path, harness.HAProxyConfig{
			Front: front[0], Servers: servers, CheckPath: checkPath, Dir: dir,
		}); err != nil {
			return nil, err
		}
	}
	return &checked{b: b, client: harness.NewClient(nil)}, nil
}
