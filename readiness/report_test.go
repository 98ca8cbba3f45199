package readiness

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonBody is the shape Report.marshal writes, encoded by encoding/json
// as the reference.
type jsonBody struct {
	Status     string          `json:"status"`
	Reason     string          `json:"reason,omitempty"`
	Service    string          `json:"service"`
	NodeID     string          `json:"node_id"`
	TimeUnixMS int64           `json:"time_unix_ms"`
	Checks     []jsonCheckBody `json:"checks,omitempty"`
}

type jsonCheckBody struct {
	Name       string `json:"name"`
	Tier       string `json:"tier"`
	Status     string `json:"status"`
	Message    string `json:"message,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	AgeMS      int64  `json:"age_ms"`
}

func TestMarshalMatchesEncodingJSON(t *testing.T) {
	at := time.UnixMilli(1777000000123)
	checks := []CheckResult{
		{Name: "database", Tier: "gating", Status: StatusOK, Duration: 3 * time.Millisecond, Age: 250 * time.Millisecond},
		{Name: "room_grpc", Tier: "gating", Status: StatusFail, Message: "deadline exceeded", Duration: 300 * time.Millisecond},
		{Name: `quote " back \ <tag> & é`, Tier: "informational", Status: StatusFail, Message: "ctl \x01\t\n \u2028 end"},
		{Name: "", Tier: "liveness", Status: StatusDegraded, Age: -time.Millisecond},
	}
	tests := []struct {
		name    string
		give    Report
		verbose bool
	}{
		{"ok, no checks", Report{Status: StatusOK, Service: "room-service", NodeID: "room-1", Time: at}, false},
		{"ok, checks not listed", Report{Status: StatusOK, Service: "room-service", NodeID: "room-1", Time: at, Checks: checks[:1]}, false},
		{"verbose", Report{Status: StatusFail, Service: "room-service", NodeID: "room-1", Time: at, Checks: checks}, true},
		{"failures only", Report{Status: StatusFail, Service: "s", NodeID: "n", Time: at, Checks: checks}, false},
		{"reason and escapes", Report{Status: StatusFail, Reason: "draining", Service: "svc<&>", NodeID: "nöde\"1", Time: time.Time{}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := jsonBody{Status: tt.give.Status, Reason: tt.give.Reason, Service: tt.give.Service,
				NodeID: tt.give.NodeID, TimeUnixMS: tt.give.Time.UnixMilli()}
			for _, c := range tt.give.Checks {
				if tt.verbose || c.Status == StatusFail {
					want.Checks = append(want.Checks, jsonCheckBody{Name: c.Name, Tier: c.Tier, Status: c.Status,
						Message: c.Message, DurationMS: c.Duration.Milliseconds(), AgeMS: c.Age.Milliseconds()})
				}
			}
			wantBytes, err := json.Marshal(want)
			require.NoError(t, err)
			assert.Equal(t, string(wantBytes)+"\n", string(tt.give.marshal(tt.verbose)))
		})
	}
}
