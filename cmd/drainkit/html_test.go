package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/harness"
)

// A gRPC drill's page counts its calls by the gRPC causes, as its verdict
// does, and its legend names those causes only; every instance has its
// lane with the moments the drill saw.
func TestPageOfAGRPCDrill(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var outs []outcome
	for i := range 60 { // 3 s at 20 calls/s; the second second fails
		o := outcome{sent: at(i * 50), answered: at(i*50 + 2)}
		switch {
		case i >= 20 && i < 30:
			o.code, o.cause, o.err = "Unavailable", causeUnavailable, `rpc error: code = Unavailable desc = "refused" <&>`
		case i >= 30 && i < 33:
			o.code, o.cause, o.err = "DeadlineExceeded", causeDeadline, "rpc error: code = DeadlineExceeded"
		}
		outs = append(outs, o)
	}
	u := &update{start: at(800), end: at(2600), old: []stopped{{Name: "i1", sigterm: at(1000), removed: at(3000), exited: at(1003)}}}
	cfg := &drillConfig{GRPC: true, Instances: 1, LB: "kube", Lag: 2 * time.Second, Rate: 20, Command: []string{"/tmp/grpc-naive"}}
	v := judge(cfg, &kube{lag: cfg.Lag}, httpCaller{}, []*instance{{name: "i1"}}, u, outs, harness.Sent{N: len(outs), Last: at(2950)})
	p := &picture{v: v, outcomes: outs, update: u, lives: []life{
		{name: "i1", old: true, started: at(0), ready: at(100), sigterm: at(1000), removed: at(3000), exited: at(1003)},
		{name: "i2", started: at(800), ready: at(900)},
	}}
	path := filepath.Join(t.TempDir(), "drill.html")
	require.NoError(t, writeHTML(path, p))

	b, err := json.Marshal(v)
	require.NoError(t, err)
	var vj verdictJSON
	require.NoError(t, json.Unmarshal(b, &vj))
	require.Equal(t, map[string]int{causeUnavailable: 10, causeDeadline: 3, causeOther: 0}, vj.FailedBy)
	page := assertPage(t, path, vj)
	assert.Contains(t, page, "1 instance of grpc-naive behind kube (endpoints removed 2s after SIGTERM), 20 gRPC calls/s")
	assert.Contains(t, page, ">calls sent</th>")
	assert.Contains(t, page, "UNAVAILABLE</span>")
	assert.NotContains(t, page, "connection refused</span>", "an HTTP cause in a gRPC legend")
	assert.Contains(t, page, `&#34;refused&#34; &lt;&amp;&gt;`, "an error's text is escaped")
	for _, moment := range []string{"i1 ready at 0.1s", "i1 SIGTERM at 1.0s", "i1 endpoint removed at 3.0s", "i1 exit at 1.0s", "i2 ready at 0.9s"} {
		assert.Contains(t, page, moment)
	}
	assert.Equal(t, 1, strings.Count(page, ">new i2</text>"), "the new instance's lane")
}
