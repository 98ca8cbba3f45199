package app

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/lifecycle"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		give    map[string]string
		want    Config
		wantErr string
	}{
		{name: "list", give: map[string]string{"ROOM_GRPC_ADDRS": "10.0.0.1:13001, room-b:13001"},
			want: Config{HTTPAddr: ":13000", Backends: []string{"10.0.0.1:13001", "room-b:13001"}, RequestTimeout: DefaultRequestTimeout,
				MaxPending: DefaultMaxPending, MaxPendingBytes: DefaultMaxPendingBytes}},
		{name: "dns target", give: map[string]string{"ROOM_GRPC_ADDRS": "dns:///room-service-headless:13001", "HTTP_ADDR": "127.0.0.1:8080"},
			want: Config{HTTPAddr: "127.0.0.1:8080", DNSTarget: "dns:///room-service-headless:13001", RequestTimeout: DefaultRequestTimeout,
				MaxPending: DefaultMaxPending, MaxPendingBytes: DefaultMaxPendingBytes}},
		{name: "request timeout and caps", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "REQUEST_TIMEOUT": "4s", "MAX_PENDING": "10", "MAX_PENDING_BYTES": "1000000"},
			want: Config{HTTPAddr: ":13000", Backends: []string{"a:1"}, RequestTimeout: 4 * time.Second, MaxPending: 10, MaxPendingBytes: 1000000}},
		{name: "request timeout not a duration", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "REQUEST_TIMEOUT": "abc"}, wantErr: `REQUEST_TIMEOUT="abc": want a positive duration`},
		{name: "request timeout zero", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "REQUEST_TIMEOUT": "0s"}, wantErr: `REQUEST_TIMEOUT="0s"`},
		{name: "request timeout outlasts the drain", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "REQUEST_TIMEOUT": "26s"},
			wantErr: `REQUEST_TIMEOUT="26s": want less than DRAIN_TIMEOUT 30s minus DRAIN_DELAY 5s`},
		{name: "default request timeout outlasts a short drain", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "DRAIN_TIMEOUT": "10s", "DRAIN_DELAY": "1s"},
			wantErr: `REQUEST_TIMEOUT="15s": want less than DRAIN_TIMEOUT 10s minus DRAIN_DELAY 1s`},
		{name: "SSE close rate", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "SSE_MAX_CLOSE_RATE": "150.5"},
			want: Config{HTTPAddr: ":13000", Backends: []string{"a:1"}, RequestTimeout: DefaultRequestTimeout,
				MaxPending: DefaultMaxPending, MaxPendingBytes: DefaultMaxPendingBytes, SSEMaxCloseRate: 150.5}},
		{name: "SSE close at the deadline", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "SSE_MAX_CLOSE_RATE": "off"},
			want: Config{HTTPAddr: ":13000", Backends: []string{"a:1"}, RequestTimeout: DefaultRequestTimeout,
				MaxPending: DefaultMaxPending, MaxPendingBytes: DefaultMaxPendingBytes, SSECloseAtDeadline: true}},
		{name: "SSE close rate zero", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "SSE_MAX_CLOSE_RATE": "0"}, wantErr: `SSE_MAX_CLOSE_RATE="0": want a positive number`},
		{name: "SSE close rate not a number", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "SSE_MAX_CLOSE_RATE": "fast"}, wantErr: `SSE_MAX_CLOSE_RATE="fast"`},
		{name: "max pending zero", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "MAX_PENDING": "0"}, wantErr: `MAX_PENDING="0": want a positive number`},
		{name: "max pending bytes below one request", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "MAX_PENDING_BYTES": "100"}, wantErr: `MAX_PENDING_BYTES="100": want a number of bytes of at least`},
		{name: "missing", give: map[string]string{}, wantErr: `ROOM_GRPC_ADDRS="": required`},
		{name: "blank", give: map[string]string{"ROOM_GRPC_ADDRS": " "}, wantErr: `ROOM_GRPC_ADDRS=" ": required`},
		{name: "no port", give: map[string]string{"ROOM_GRPC_ADDRS": "room-a"}, wantErr: `item 1 "room-a": want host:port`},
		{name: "empty item", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1,,b:2"}, wantErr: `item 2 "": want host:port`},
		{name: "no host", give: map[string]string{"ROOM_GRPC_ADDRS": ":13001"}, wantErr: "want a host"},
		{name: "bad port", give: map[string]string{"ROOM_GRPC_ADDRS": "a:99999"}, wantErr: `port "99999"`},
		{name: "repeated", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1,a:1"}, wantErr: "listed twice"},
		{name: "bad dns target", give: map[string]string{"ROOM_GRPC_ADDRS": "dns:///room"}, wantErr: "want host:port"},
		{name: "bad HTTP_ADDR", give: map[string]string{"ROOM_GRPC_ADDRS": "a:1", "HTTP_ADDR": "13000"}, wantErr: `HTTP_ADDR="13000"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lcfg, err := lifecycle.ConfigFromEnv(env(tt.give))
			require.NoError(t, err)
			got, err := configFromEnv(env(tt.give), lcfg)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestBadConfigExitsWithConfigCode(t *testing.T) {
	tests := []struct {
		name, want string
		give       map[string]string
	}{
		{"no backends", "ROOM_GRPC_ADDRS", map[string]string{}},
		{"bad drain timeout", "DRAIN_TIMEOUT", map[string]string{"ROOM_GRPC_ADDRS": "a:1", "DRAIN_TIMEOUT": "abc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(env(tt.give), &stdout, &stderr)
			assert.Equal(t, lifecycle.ExitConfig, code, "got exit %d; want %d", code, lifecycle.ExitConfig)
			assert.Contains(t, stderr.String(), tt.want)
			assert.Empty(t, stdout.String(), "nothing listened")
		})
	}
}

func TestServiceNameDefaults(t *testing.T) {
	c, err := lifecycle.ConfigFromEnv(lifecycleEnv(env(map[string]string{"NODE_ID": "gw-1"})))
	require.NoError(t, err)
	assert.Equal(t, DefaultService, c.Service)
	c, err = lifecycle.ConfigFromEnv(lifecycleEnv(env(map[string]string{"SERVICE_NAME": "edge", "NODE_ID": "gw-1"})))
	require.NoError(t, err)
	assert.Equal(t, "edge", c.Service)
	assert.True(t, strings.HasPrefix(DefaultHTTPAddr, ":"))
}
