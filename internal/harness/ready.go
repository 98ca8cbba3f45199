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
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("harness: readiness URL %q: %w", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-p.Done():
			return fmt.Errorf("harness: %s exited (%s) before %s answered 2xx; its last lines:\n%s",
				p.Name, p.ExitState(), url, indent(p.LastLines(20)))
		case <-ctx.Done():
			return fmt.Errorf("harness: %s: %s never answered 2xx (last: %s): %w; its last lines:\n%s",
				p.Name, url, last, ctx.Err(), indent(p.LastLines(20)))
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
