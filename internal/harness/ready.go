package harness

import (
	"context"
	"fmt"
	"net/http"
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
