package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// gatewayRetriesMetric counts the attempts a gateway sent again to a
// room-service on a client's behalf, by what the attempt before ended in.
const gatewayRetriesMetric = "gateway_backend_retries_total"

// GatewayRetries are the retries the gateways made on the clients' behalf,
// by what the attempt before ended in ("refused", "unknown"): a failure
// they hid from the client, reported beside the failures. Each gateway is
// read before it is stopped and at the end; the few a gateway makes
// between that read and its exit, and those of a gateway crashed, are not
// counted.
type GatewayRetries map[string]int

// add adds other's counts to g.
func (g GatewayRetries) add(other GatewayRetries) {
	for after, v := range other {
		g[after] += v
	}
}

func (g GatewayRetries) String() string {
	total, parts := 0, []string{}
	for _, after := range slices.Sorted(maps.Keys(g)) {
		total += g[after]
		parts = append(parts, fmt.Sprintf("after %s: %d", after, g[after]))
	}
	if len(parts) == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

// GatewayRetries adds up what every gateway reported: those stopped, and
// those running now, read from their /metrics.
func (c *Cluster) GatewayRetries(ctx context.Context) (GatewayRetries, error) {
	sum := GatewayRetries{}
	c.mu.Lock()
	sum.add(c.gwRetries)
	c.mu.Unlock()
	for _, n := range c.Gateways() {
		got, err := scrapeGatewayRetries(ctx, n)
		if err != nil {
			return nil, err
		}
		sum.add(got)
	}
	return sum, nil
}

// noteGatewayRetries keeps what gateway n counted so far, before it stops.
func (c *Cluster) noteGatewayRetries(ctx context.Context, n *Node) error {
	got, err := scrapeGatewayRetries(ctx, n)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gwRetries == nil {
		c.gwRetries = GatewayRetries{}
	}
	c.gwRetries.add(got)
	return nil
}

// scrapeGatewayRetries reads gateway n's retry counters from its /metrics.
func scrapeGatewayRetries(ctx context.Context, n *Node) (GatewayRetries, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.Admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("e2e: %s /metrics: %w", n.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("e2e: %s /metrics: %s", n.Name, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("e2e: %s /metrics: %w", n.Name, err)
	}
	out := GatewayRetries{}
	if f := families[gatewayRetriesMetric]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "after" {
					out[l.GetValue()] += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return out, nil
}
