package e2e

import (
	"context"
	"fmt"

	"github.com/drainkit/drainkit/internal/harness"
)

// balancer is the load balancer in front of the gateway slots:
// *harness.HAProxy or *harness.InProcess.
type balancer interface {
	Name() string
	Addr() string
	// WaitServer waits until the balancer's health checks hold slot i up
	// (or down).
	WaitServer(ctx context.Context, i int, up bool) error
	Retries() int
	// Output is the balancer's log: with HAProxy, one line per request
	// that did not end normally, and one per event stream.
	Output() string
	Close()
}

// startBalancer starts the balancer cfg names, or returns nil and an
// error: never a nil pointer in a non-nil balancer, which Close would call.
func startBalancer(ctx context.Context, cfg Config, front string, slots []string) (balancer, error) {
	path, err := harness.HAProxyPath()
	switch {
	case cfg.Balancer == "inprocess" || (cfg.Balancer == "auto" && err != nil):
		return started(harness.StartInProcess(gatewayServers(slots), "", noGateway))
	case cfg.Balancer != "haproxy" && cfg.Balancer != "auto":
		return nil, fmt.Errorf("e2e: Config.Balancer %q: want haproxy, inprocess or auto", cfg.Balancer)
	case err != nil:
		return nil, fmt.Errorf("e2e: haproxy not found (scripts/test installs it): %w", err)
	}
	return started(harness.StartHAProxy(ctx, path, haproxyConfig(cfg.Dir, front, slots, cfg.Balance)))
}

func started[B balancer](b B, err error) (balancer, error) {
	if err != nil {
		return nil, err
	}
	return b, nil
}

// noGateway is the error of the balancer's own 503.
const noGateway = "no gateway available"

func gatewayServers(slots []string) []harness.Server {
	servers := make([]harness.Server, len(slots))
	for i, s := range slots {
		servers[i] = harness.Server{Name: GatewaySlot(i), Addr: s}
	}
	return servers
}

// haproxyConfig is HAProxy in front of the gateway slots as a production
// ingress would be (see [harness.HAProxyConfig]), with event streams
// logged when they end, ended well or not, so that their ends are timed
// by the balancer ([Cluster.StreamEnds]); other requests only when they
// failed.
func haproxyConfig(dir, front string, slots []string, balance string) harness.HAProxyConfig {
	return harness.HAProxyConfig{
		Front: front, Servers: gatewayServers(slots), Backend: "gateways", Balance: balance,
		NoServer: noGateway, Dir: dir,
		FrontendRules: []string{
			"no option dontlog-normal",
			"http-request set-var(txn.sse) bool(true) if { path_end /events }",
			"http-response set-log-level silent if { status 200 } !{ var(txn.sse) -m bool }",
		},
	}
}
