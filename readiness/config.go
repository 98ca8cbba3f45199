package readiness

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/lifecycle"
)

// Defaults for [Config]. A whole ready evaluation stays under 500 ms: a
// health check fails fast rather than keep a prober waiting on a slow
// dependency.
const (
	// DefaultReadyTimeout bounds one whole ready evaluation (HEALTH_READY_TIMEOUT).
	DefaultReadyTimeout = lifecycle.DefaultReadyTimeout
	// DefaultCacheTTL is how long an evaluation's results answer probes.
	DefaultCacheTTL = time.Second
	// DefaultCheckTimeout is the timeout of a [Check] registered without one.
	DefaultCheckTimeout = 300 * time.Millisecond
)

// Config configures a [Registry]. Zero durations mean their defaults.
// [New] checks it before anything else (before registering metrics) and
// refuses a bad one naming the field and the value; there is no Validate
// method, so that a config is refused in one place, with one error.
type Config struct {
	// Service is the full service name (e.g. "room-service"), reported in
	// bodies and logs and used as the gRPC health service name.
	Service string
	// NodeID names this instance; unique per replica.
	NodeID string
	// ReadyTimeout bounds one ready evaluation; default [DefaultReadyTimeout].
	ReadyTimeout time.Duration
	// CacheTTL is how long results are reused; default [DefaultCacheTTL].
	// Results in which a gating check failed are reused for a fifth of it,
	// so that a recovery is seen promptly.
	CacheTTL time.Duration
	// CheckTimeout is the timeout of checks added without one; default
	// [DefaultCheckTimeout], or ReadyTimeout when that is shorter. It may
	// not exceed ReadyTimeout.
	CheckTimeout time.Duration
	// Logger receives transition logs; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the health_* metrics; nil registers nothing (the
	// metrics are still kept, which keeps tests and examples independent).
	Registerer prometheus.Registerer
}

// validate reports the first field with a bad value, for New. Zero
// durations are valid: they mean the defaults.
func (c Config) validate() error {
	if c.Service == "" {
		return configerr.Errorf(`readiness: Config.Service is empty; want a service name such as "room-service"`)
	}
	if c.NodeID == "" {
		return configerr.Errorf("readiness: Config.NodeID is empty; want this instance's unique node id")
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"ReadyTimeout", c.ReadyTimeout}, {"CacheTTL", c.CacheTTL}, {"CheckTimeout", c.CheckTimeout}} {
		if f.d < 0 {
			return configerr.Errorf("readiness: Config.%s is %v; want a positive duration or zero for the default", f.name, f.d)
		}
	}
	d := c.withDefaults()
	if d.CheckTimeout > d.ReadyTimeout {
		return configerr.Errorf("readiness: Config.CheckTimeout %v exceeds ReadyTimeout %v", d.CheckTimeout, d.ReadyTimeout)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = DefaultCacheTTL
	}
	if c.CheckTimeout == 0 {
		// A shorter ReadyTimeout (HEALTH_READY_TIMEOUT=200ms) lowers the
		// default rather than refusing a value the user never set.
		c.CheckTimeout = min(DefaultCheckTimeout, c.ReadyTimeout)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
