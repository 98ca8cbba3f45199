package lifecycle_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
		want    lifecycle.Config
		wantErr string
	}{
		{
			name: "defaults",
			give: map[string]string{"SERVICE_NAME": "room-service", "NODE_ID": "n1"},
			want: lifecycle.Config{Service: "room-service", NodeID: "n1", DrainTimeout: 30 * time.Second,
				DrainDelay: 5 * time.Second, ReadyTimeout: 500 * time.Millisecond},
		},
		{
			name: "all set, adaptive",
			give: map[string]string{"NODE_ID": "n1", "DRAIN_TIMEOUT": "20s", "DRAIN_DELAY": "8s",
				"DRAIN_QUIET_WINDOW": "2s", "DRAIN_DELAY_FLOOR": "3s", "HEALTH_READY_TIMEOUT": "300ms"},
			want: lifecycle.Config{Service: executable(), NodeID: "n1", DrainTimeout: 20 * time.Second, DrainDelay: 8 * time.Second,
				QuietWindow: 2 * time.Second, DelayFloor: 3 * time.Second, ReadyTimeout: 300 * time.Millisecond},
		},
		{name: "timeout not a duration", give: map[string]string{"DRAIN_TIMEOUT": "abc"}, wantErr: `DRAIN_TIMEOUT="abc": not a duration`},
		{name: "timeout negative", give: map[string]string{"DRAIN_TIMEOUT": "-5s"}, wantErr: `DRAIN_TIMEOUT="-5s": must be positive`},
		{name: "timeout bare number", give: map[string]string{"DRAIN_TIMEOUT": "30"}, wantErr: `DRAIN_TIMEOUT="30": not a duration`},
		{name: "delay negative", give: map[string]string{"DRAIN_DELAY": "-1s"}, wantErr: `DRAIN_DELAY="-1s": must not be negative`},
		{name: "delay not shorter than timeout", give: map[string]string{"DRAIN_TIMEOUT": "10s", "DRAIN_DELAY": "10s"},
			wantErr: `DRAIN_DELAY="10s": must be shorter than DRAIN_TIMEOUT (10s)`},
		{name: "refusal quotes the values as written", give: map[string]string{"DRAIN_TIMEOUT": "30000ms", "DRAIN_DELAY": "40000ms"},
			wantErr: `DRAIN_DELAY="40000ms": must be shorter than DRAIN_TIMEOUT (30000ms)`},
		{name: "floor refusal quotes the delay as written", give: map[string]string{"DRAIN_DELAY": "2000ms", "DRAIN_QUIET_WINDOW": "1s", "DRAIN_DELAY_FLOOR": "3s"},
			wantErr: `DRAIN_DELAY_FLOOR="3s": must not exceed DRAIN_DELAY (2000ms)`},
		{name: "default delay does not fit a short timeout", give: map[string]string{"DRAIN_TIMEOUT": "3s"},
			wantErr: `DRAIN_DELAY="5s": must be shorter than DRAIN_TIMEOUT (3s), or no time is left to drain (DRAIN_DELAY is unset and defaults to 5s: set it, 0s for none)`},
		{name: "ready timeout zero", give: map[string]string{"HEALTH_READY_TIMEOUT": "0s"},
			wantErr: `HEALTH_READY_TIMEOUT="0s": must be positive: unset it for the default, 500ms`},
		{name: "timeout zero", give: map[string]string{"DRAIN_TIMEOUT": "0"}, wantErr: `DRAIN_TIMEOUT="0": must be positive: unset it for the default, 30s`},
		{name: "quiet window zero", give: map[string]string{"DRAIN_QUIET_WINDOW": "0s"},
			wantErr: `DRAIN_QUIET_WINDOW="0s": must be positive: unset it for a fixed delay`},
		{name: "quiet window without a delay", give: map[string]string{"DRAIN_DELAY": "0s", "DRAIN_QUIET_WINDOW": "2s"},
			wantErr: `DRAIN_QUIET_WINDOW="2s": shortens the delay, and DRAIN_DELAY is 0 (none): set DRAIN_DELAY, the delay's upper bound, or unset DRAIN_QUIET_WINDOW`},
		{name: "floor without a quiet window", give: map[string]string{"DRAIN_DELAY_FLOOR": "2s"},
			wantErr: `DRAIN_DELAY_FLOOR="2s": applies only to the adaptive delay, and DRAIN_QUIET_WINDOW is unset`},
		{name: "floor above delay", give: map[string]string{"DRAIN_DELAY": "2s", "DRAIN_QUIET_WINDOW": "1s", "DRAIN_DELAY_FLOOR": "3s"},
			wantErr: `DRAIN_DELAY_FLOOR="3s": must not exceed DRAIN_DELAY (2s)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lifecycle.ConfigFromEnv(env(tt.give))
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.ErrorIs(t, err, lifecycle.ErrConfig, "fxmodule.Run exits 78 on it")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want.DrainTimeout, got.DrainTimeout)
			assert.Equal(t, tt.want.DrainDelay, got.DrainDelay)
			assert.Equal(t, tt.want.QuietWindow, got.QuietWindow)
			assert.Equal(t, tt.want.DelayFloor, got.DelayFloor)
			assert.Equal(t, tt.want.ReadyTimeout, got.ReadyTimeout)
			assert.Equal(t, tt.want.Service, got.Service)
			assert.Equal(t, tt.want.NodeID, got.NodeID)
		})
	}
}

func TestConfigFromEnvZeroDelayMeansNone(t *testing.T) {
	got, err := lifecycle.ConfigFromEnv(env(map[string]string{"DRAIN_DELAY": "0s"}))
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), got.DrainDelay)
}

func TestConfigNodeIDDefaultsToHostname(t *testing.T) {
	got, err := lifecycle.ConfigFromEnv(env(nil))
	require.NoError(t, err)
	assert.NotEmpty(t, got.NodeID)
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := lifecycle.New(lifecycle.Config{DrainTimeout: time.Second, DrainDelay: 2 * time.Second})
	assert.ErrorContains(t, err, `DrainDelay="2s"`)
	assert.ErrorIs(t, err, lifecycle.ErrConfig)
}

// executable is the base name of the test binary, the service name when
// none is given.
func executable() string { return filepath.Base(os.Args[0]) }

// A service started without SERVICE_NAME runs, named after its
// executable, whether its Config comes from the environment or is built
// by hand.
func TestServiceDefaultsToTheExecutableName(t *testing.T) {
	fromEnv, err := lifecycle.ConfigFromEnv(env(map[string]string{"NODE_ID": "n1"}))
	require.NoError(t, err)
	assert.Equal(t, "lifecycle.test", fromEnv.Service, "ConfigFromEnv")

	m, err := lifecycle.New(lifecycle.Config{NodeID: "n1"})
	require.NoError(t, err)
	assert.Equal(t, "lifecycle.test", m.Shutdown(context.Background(), "test").Service, "New")
}

// ErrConfig marks a refused configuration, and only that.
func TestErrConfigIsOnlyConfiguration(t *testing.T) {
	assert.False(t, errors.Is(errors.New("dial tcp: connection refused"), lifecycle.ErrConfig))
	err := lifecycle.Config{DrainTimeout: -time.Second}.Validate()
	assert.ErrorIs(t, err, lifecycle.ErrConfig)
	assert.Equal(t, `lifecycle: DrainTimeout="-1s": must be positive`, err.Error(), "the message is the field's alone")
}

// The environment sets durations and names only: the logger and the
// registerer are the caller's to set.
func TestConfigFromEnvLeavesLoggerAndRegistererUnset(t *testing.T) {
	got, err := lifecycle.ConfigFromEnv(env(map[string]string{"SERVICE_NAME": "svc"}))
	require.NoError(t, err)
	assert.Nil(t, got.Logger, "Logger")
	assert.Nil(t, got.Registerer, "Registerer")
}
