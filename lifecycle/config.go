package lifecycle

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainkit/drainkit/internal/configerr"
)

// Defaults for [Config].
const (
	// DefaultDrainTimeout is the whole budget from the first signal to exit.
	DefaultDrainTimeout = 30 * time.Second
	// DefaultDrainDelay is how long the process keeps serving after the flip
	// so load balancers notice it is not ready: Kubernetes endpoints and
	// kube-proxy typically converge within a few seconds.
	DefaultDrainDelay = 5 * time.Second
	// DefaultReadyTimeout bounds one readiness evaluation: a probe answers in
	// half a second or says why not.
	DefaultReadyTimeout = 500 * time.Millisecond
	// DefaultDelayFloor is the least delay when the adaptive delay is on:
	// a lull in traffic shorter than this is not taken for the load
	// balancer having noticed.
	DefaultDelayFloor = time.Second
)

// Config is what a [Manager] needs to know; [ConfigFromEnv] reads its
// durations and names from the environment, and the caller sets Logger
// and Registerer. A zero budget (DrainTimeout, ReadyTimeout, DelayFloor)
// means its default, since no drain can work with none; a zero optional
// behaviour (DrainDelay, QuietWindow) means off, and a nil Logger or
// Registerer means slog.Default() or no export. ConfigFromEnv turns the
// delay on by default (DRAIN_DELAY unset is [DefaultDrainDelay]): behind a
// load balancer a process needs one, so set DrainDelay by hand too.
// [New] and ConfigFromEnv check it before anything else and refuse a bad
// one naming the field and the value; there is no Validate method, so
// that a config is refused in one place, with one error.
type Config struct {
	// Service is the service name in logs and health bodies (SERVICE_NAME;
	// default: the executable's base name, as ps shows it). It is only a
	// label, so a missing one is not refused: that would turn a label
	// into an outage.
	Service string
	// NodeID identifies this instance (NODE_ID; default: the host name).
	NodeID string
	// DrainTimeout is the whole budget from the signal to exit, the
	// propagation delay included (DRAIN_TIMEOUT; default [DefaultDrainTimeout]).
	DrainTimeout time.Duration
	// DrainDelay is the propagation delay: how long to keep serving after
	// readiness flips, before intake stops; zero means none (DRAIN_DELAY;
	// [DefaultDrainDelay] when unset, "0s" turns it off). With QuietWindow
	// set it is the upper bound of an adaptive delay.
	DrainDelay time.Duration
	// QuietWindow turns the delay adaptive: it ends early once no new
	// request arrived for this long, but not before DelayFloor
	// (DRAIN_QUIET_WINDOW; default 0, off).
	QuietWindow time.Duration
	// DelayFloor is the least adaptive delay (DRAIN_DELAY_FLOOR; default
	// [DefaultDelayFloor] when QuietWindow is set).
	DelayFloor time.Duration
	// ReadyTimeout bounds one readiness evaluation (HEALTH_READY_TIMEOUT;
	// default [DefaultReadyTimeout]). Kept here so all environment parsing
	// lives in one place; package readiness uses it.
	ReadyTimeout time.Duration

	// Logger receives the transition, phase and report lines (default
	// slog.Default()). Not read from the environment.
	Logger *slog.Logger
	// Registerer, when set, receives the manager's metrics:
	// service_draining, service_shutdown_duration_ms and
	// drain_hook_outcomes_total{phase,outcome}. When nil they are kept but
	// not exported. Not read from the environment.
	Registerer prometheus.Registerer
	// Signals, if set, is read for the stop signals instead of the
	// process's SIGTERM and SIGINT: for a program that receives them
	// itself, and for tests, which must not signal their own process. The
	// first value drains, the second forces the drain, the third makes
	// [Manager.Run] return [ExitForced]; closing it sends none. Not read
	// from the environment.
	Signals <-chan os.Signal
}

// ErrConfig is matched, with errors.Is, by every error that refuses a
// configuration before anything started: those of [ConfigFromEnv],
// [New], [Manager.AddHook] and [Manager.Serve].
// fxmodule.Run exits with [ExitConfig] when an fx constructor's error
// matches it, and logs that error's message alone.
// Another package's validation error matches it by wrapping it (%w) or
// with an Is method, as errors.ErrUnsupported is matched.
var ErrConfig = configerr.ErrConfig

// fieldError names a configuration field (or environment variable) and
// the value it could not accept: the error of Validate and ConfigFromEnv.
type fieldError struct {
	field, value, problem string
}

func (e *fieldError) Error() string {
	return fmt.Sprintf("lifecycle: %s=%q: %s", e.field, e.value, e.problem)
}

// Is makes a fieldError match [ErrConfig] without adding its text.
func (e *fieldError) Is(target error) bool { return target == ErrConfig }

// withDefaults returns c with every unset name and budget at its default.
func (c Config) withDefaults() Config {
	if c.Service == "" {
		c.Service = executableName()
	}
	if c.NodeID == "" {
		c.NodeID, _ = os.Hostname()
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.QuietWindow > 0 && c.DelayFloor == 0 {
		c.DelayFloor = min(DefaultDelayFloor, c.DrainDelay)
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	return c
}

// validate reports the first field that cannot work, in an error that
// names the field and its value, e.g. lifecycle: DrainDelay="40s": must be
// shorter than DrainTimeout (30s), or no time is left to drain. New and
// ConfigFromEnv refuse a config with it.
func (c Config) validate() error {
	bad := func(field string, v time.Duration, problem string) error {
		return &fieldError{field: field, value: v.String(), problem: problem}
	}
	switch {
	case c.DrainTimeout <= 0:
		return bad("DrainTimeout", c.DrainTimeout, "must be positive")
	case c.DrainDelay < 0:
		return bad("DrainDelay", c.DrainDelay, "must not be negative")
	case c.DrainDelay >= c.DrainTimeout:
		return bad("DrainDelay", c.DrainDelay, fmt.Sprintf("must be shorter than DrainTimeout (%s), or no time is left to drain", c.DrainTimeout))
	case c.QuietWindow < 0:
		return bad("QuietWindow", c.QuietWindow, "must not be negative")
	case c.DelayFloor < 0:
		return bad("DelayFloor", c.DelayFloor, "must not be negative")
	case c.QuietWindow > 0 && c.DrainDelay == 0:
		return bad("QuietWindow", c.QuietWindow, "shortens the delay, and DrainDelay is 0 (none): set DrainDelay, the delay's upper bound, or unset QuietWindow")
	case c.QuietWindow > 0 && c.DelayFloor > c.DrainDelay:
		return bad("DelayFloor", c.DelayFloor, fmt.Sprintf("must not exceed DrainDelay (%s)", c.DrainDelay))
	case c.ReadyTimeout <= 0:
		return bad("ReadyTimeout", c.ReadyTimeout, "must be positive")
	}
	return nil
}

// ConfigFromEnv reads the configuration from the environment through
// getenv (os.Getenv when nil), applies defaults and validates it. A value
// that does not parse is an error naming the variable and the value:
// nothing falls back silently to a default, and a default that does not
// fit (DRAIN_DELAY's 5s with DRAIN_TIMEOUT=3s) is refused as a value would be. Logger and Registerer are left
// for the caller to set.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{Service: getenv("SERVICE_NAME"), NodeID: getenv("NODE_ID")}
	durations := []struct {
		env, unset string // unset: what leaving the variable unset gives, for the advice on a zero
		dst        *time.Duration
	}{
		{"DRAIN_TIMEOUT", "the default, " + DefaultDrainTimeout.String(), &c.DrainTimeout},
		{"DRAIN_DELAY", "", &c.DrainDelay},
		{"DRAIN_QUIET_WINDOW", "a fixed delay", &c.QuietWindow},
		{"DRAIN_DELAY_FLOOR", "the default, " + DefaultDelayFloor.String(), &c.DelayFloor},
		{"HEALTH_READY_TIMEOUT", "the default, " + DefaultReadyTimeout.String(), &c.ReadyTimeout},
	}
	for _, d := range durations {
		v := getenv(d.env)
		if v == "" {
			continue
		}
		parsed, err := time.ParseDuration(v)
		if err != nil {
			return Config{}, &fieldError{field: d.env, value: v, problem: "not a duration (want e.g. 30s, 500ms)"}
		}
		if parsed < 0 && d.env != "DRAIN_DELAY" {
			return Config{}, &fieldError{field: d.env, value: v, problem: "must be positive"}
		}
		if parsed == 0 && d.env != "DRAIN_DELAY" { // a zero field means "unset", which the variable says plainly
			return Config{}, &fieldError{field: d.env, value: v, problem: "must be positive: unset it for " + d.unset}
		}
		if parsed < 0 {
			return Config{}, &fieldError{field: d.env, value: v, problem: "must not be negative"}
		}
		*d.dst = parsed
	}
	if floor := getenv("DRAIN_DELAY_FLOOR"); floor != "" && c.QuietWindow == 0 {
		return Config{}, &fieldError{field: "DRAIN_DELAY_FLOOR", value: floor,
			problem: "applies only to the adaptive delay, and DRAIN_QUIET_WINDOW is unset: set it, or unset DRAIN_DELAY_FLOOR"}
	}
	delayUnset := getenv("DRAIN_DELAY") == ""
	if delayUnset {
		// The default even when it does not fit a short DRAIN_TIMEOUT:
		// shortening it would change the drain without a word, so Validate
		// refuses it as it refuses an explicit one.
		c.DrainDelay = DefaultDrainDelay
	}
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		// Name the variables, not the fields: that is what the operator set.
		var fe *fieldError
		if errors.As(err, &fe) {
			fe.field = envName(fe.field)
			fe.problem = fieldsAsEnv.Replace(fe.problem)
			// Quote every value as the operator wrote it, "40000ms" rather
			// than "40s": that is what a manifest can be searched for.
			if raw := getenv(fe.field); raw != "" {
				fe.value = raw
			}
			for _, d := range durations {
				if raw := getenv(d.env); raw != "" {
					fe.problem = strings.ReplaceAll(fe.problem, fmt.Sprintf("%s (%s)", d.env, *d.dst), fmt.Sprintf("%s (%s)", d.env, raw))
				}
			}
			if fe.field == "DRAIN_DELAY" && delayUnset {
				fe.problem += fmt.Sprintf(" (DRAIN_DELAY is unset and defaults to %s: set it, 0s for none)", DefaultDrainDelay)
			}
		}
		return Config{}, err
	}
	return c, nil
}

// executableName is the base name of the program as it was started,
// without a Windows ".exe": "room-service" for /app/room-service.
func executableName() string {
	if len(os.Args) == 0 {
		return ""
	}
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")
}

// envNames maps the fields ConfigFromEnv reads to their variables.
var envNames = map[string]string{
	"DrainTimeout": "DRAIN_TIMEOUT",
	"DrainDelay":   "DRAIN_DELAY",
	"QuietWindow":  "DRAIN_QUIET_WINDOW",
	"DelayFloor":   "DRAIN_DELAY_FLOOR",
	"ReadyTimeout": "HEALTH_READY_TIMEOUT",
}

// fieldsAsEnv rewrites the fields a Validate problem mentions ("must be
// shorter than DrainTimeout (30s)") as their variables.
var fieldsAsEnv = func() *strings.Replacer {
	var pairs []string
	for f, v := range envNames {
		pairs = append(pairs, f, v)
	}
	return strings.NewReplacer(pairs...)
}()

func envName(field string) string {
	if v, ok := envNames[field]; ok {
		return v
	}
	return field
}
