package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// WaitReady polls url until it answers 2xx, and fails when p exits first
// or ctx ends, with the end of p's output. Polling is how an orchestrator
// learns that an external process is ready; each probe has a second.
func WaitReady(ctx context.Context, p *Proc, url string) error {
	if _, err := http.NewRequest(http.MethodGet, url, nil); err != nil {
		return fmt.Errorf("harness: readiness URL %q: %w", url, err)
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	return WaitUntil(ctx, p, url, "answered 2xx", func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil) // its URL parsed above
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	})
}

// WaitUntil calls probe every 50 ms until it returns nil, and fails when p
// exits first or ctx ends, saying that subject never did what (e.g. a URL
// never "answered 2xx"), with the last probe's error and the end of p's
// output.
func WaitUntil(ctx context.Context, p *Proc, subject, what string, probe func(context.Context) error) error {
	for {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("harness: %s exited (%s) before %s %s; its last lines:\n%s",
				p.Name, p.ExitState(), subject, what, indent(p.LastLines(20)))
		case <-ctx.Done():
			return fmt.Errorf("harness: %s: %s never %s (last: %s): %w; its last lines:\n%s",
				p.Name, subject, what, err, ctx.Err(), indent(p.LastLines(20)))
		case <-time.After(50 * time.Millisecond): // polling an external process
		}
	}
}

func indent(lines []string) string {
	if len(lines) == 0 {
		return "  (nothing printed)"
	}
	return "  " + strings.Join(lines, "\n  ")
}

// WaitServing runs the real grpc-health-probe against addr until it exits
// 0 (grpc.health.v1 says SERVING for the whole server), and fails as
// WaitReady does. A gRPC client with health checking routes to a replica
// only from then on, which can be just after its HTTP readiness answers
// 2xx: the gRPC status follows the registry on an evaluation of its own.
func WaitServing(ctx context.Context, p *Proc, addr string) error {
	probe, err := HealthProbe()
	if err != nil {
		return err
	}
	return WaitUntil(ctx, p, "grpc.health.v1 at "+addr, "answered SERVING", func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, probe, "-addr="+addr, "-connect-timeout=1s", "-rpc-timeout=1s").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	})
}

// HealthProbe finds the real grpc-health-probe binary: in PATH, or where
// go install put it ($(go env GOPATH)/bin), as scripts/test does.
func HealthProbe() (string, error) {
	if p, err := exec.LookPath("grpc-health-probe"); err == nil {
		return p, nil
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return "", fmt.Errorf("harness: grpc-health-probe is not in PATH, and go env GOPATH: %w", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "bin", "grpc-health-probe")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("harness: grpc-health-probe is in neither PATH nor $(go env GOPATH)/bin; "+
			"install it with: go install github.com/grpc-ecosystem/grpc-health-probe@v0.4.62 (scripts/test does): %w", err)
	}
	return p, nil
}
