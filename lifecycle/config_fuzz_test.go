package lifecycle_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/lifecycle"
)

// durationVars are the variables ConfigFromEnv parses as durations, in
// the order FuzzConfigFromEnv takes them.
var durationVars = []string{"DRAIN_TIMEOUT", "DRAIN_DELAY", "DRAIN_QUIET_WINDOW", "DRAIN_DELAY_FLOOR", "HEALTH_READY_TIMEOUT"}

// FuzzConfigFromEnv: whatever the environment holds, ConfigFromEnv either
// refuses it with an ErrConfig error that names a variable that was set
// (or DRAIN_DELAY, saying its default does not fit), or returns a valid Config in which every variable that was set reads as
// the duration it parses to (nothing replaced silently by a default).
func FuzzConfigFromEnv(f *testing.F) {
	f.Add("", "", "", "", "")
	f.Add("20s", "8s", "2s", "3s", "300ms")
	f.Add("abc", "", "", "", "")
	f.Add("-5s", "", "", "", "")
	f.Add("30", "", "", "", "")
	f.Add("", "-1s", "", "", "")
	f.Add("10s", "10s", "", "", "")
	f.Add("", "", "", "", "0s")
	f.Add("", "2s", "1s", "3s", "")
	f.Add("3s", "", "", "", "")
	f.Add("1ns", "0s", "1ns", "", "9223372036854775807ns")
	f.Fuzz(func(t *testing.T, timeout, delay, quiet, floor, ready string) {
		values := []string{timeout, delay, quiet, floor, ready}
		vars := map[string]string{"SERVICE_NAME": "svc", "NODE_ID": "n1"}
		for i, v := range values {
			vars[durationVars[i]] = v
		}
		c, err := lifecycle.ConfigFromEnv(func(k string) string { return vars[k] })
		if err != nil {
			require.ErrorIs(t, err, lifecycle.ErrConfig, "got %v; want an error matching ErrConfig", err)
			named := ""
			for i, name := range durationVars {
				set := values[i] != "" || name == "DRAIN_DELAY" && strings.Contains(err.Error(), "DRAIN_DELAY is unset")
				if set && strings.HasPrefix(err.Error(), "lifecycle: "+name+"=") {
					named = name
				}
			}
			assert.NotEmpty(t, named, "got %q; want it to start with a variable that was set, and its value", err)
			return
		}
		require.NoError(t, c.Validate(), "a Config ConfigFromEnv returned")
		fields := []time.Duration{c.DrainTimeout, c.DrainDelay, c.QuietWindow, c.DelayFloor, c.ReadyTimeout}
		for i, v := range values {
			if v == "" {
				continue
			}
			want, perr := time.ParseDuration(v)
			require.NoError(t, perr, "%s=%q was accepted", durationVars[i], v)
			assert.Equal(t, want, fields[i], "%s=%q: got %s; want the value set", durationVars[i], v, fields[i])
		}
	})
}
