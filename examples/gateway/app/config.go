package app

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/drainkit/drainkit/lifecycle"
)

// Defaults for [Config].
const (
	// DefaultHTTPAddr is where the API and the health endpoints listen.
	DefaultHTTPAddr = ":13000"
	// DefaultService is the service name in logs and health bodies.
	DefaultService = "gateway-service"
	// DefaultRequestTimeout is a request's deadline when the client gives
	// none shorter: well above room-service's default LEASE_TTL (1 s), so a
	// request for a room whose owner crashed waits until its session
	// expires and another node takes the room over (or one with a raised
	// LEASE_TTL, up to about 14 s), and under the
	// default DRAIN_TIMEOUT minus DRAIN_DELAY, so a request in flight at
	// SIGTERM ends before the drain does.
	DefaultRequestTimeout = 15 * time.Second
	// DefaultMaxPending bounds the API requests the gateway holds at once
	// (forwarding or waiting out a fault); the next one gets 503 at once.
	DefaultMaxPending = 1024
	// DefaultMaxPendingBytes bounds the memory those requests account for
	// (see [pendingCost]); the next one gets 503 at once.
	DefaultMaxPendingBytes = 32 << 20
	// DefaultAttemptTimeout bounds one attempt of a request at one
	// room-service: a backend that lets it pass is taken for stalled (a
	// frozen process, a port that accepts while nothing answers) and routed
	// around until it answers a health check, so its rooms move once their
	// leases are free. Commands are safe to resend (command_id).
	DefaultAttemptTimeout = time.Second
	// HealthService is the grpc.health.v1 service name the room backends
	// report; round_robin only picks a backend SERVING it.
	HealthService = "room-service"
)

// Config is the gateway's own configuration; the lifecycle settings
// (DRAIN_TIMEOUT, …) are lifecycle.Config's.
type Config struct {
	// HTTPAddr is the listen address (HTTP_ADDR; default [DefaultHTTPAddr]).
	HTTPAddr string
	// Backends are the room-service gRPC addresses from ROOM_GRPC_ADDRS
	// (host:port, comma-separated), balanced by round_robin over a static
	// resolver.
	Backends []string
	// DNSTarget is set instead of Backends when ROOM_GRPC_ADDRS is a single
	// "dns:///host:port" (a Kubernetes headless Service).
	DNSTarget string
	// RequestTimeout is a request's deadline (REQUEST_TIMEOUT; default
	// [DefaultRequestTimeout]); a shorter Request-Timeout header wins.
	// Within it the gateway waits out backends that are down, draining or
	// moving a room; it must be shorter than DRAIN_TIMEOUT minus
	// DRAIN_DELAY, so the drain can wait for it.
	RequestTimeout time.Duration
	// AttemptTimeout bounds one attempt at one backend (ATTEMPT_TIMEOUT;
	// zero means [DefaultAttemptTimeout]); it must be shorter than
	// RequestTimeout.
	AttemptTimeout time.Duration
	// MaxPending and MaxPendingBytes cap the API requests held at once,
	// in number and in accounted memory (MAX_PENDING, MAX_PENDING_BYTES;
	// defaults [DefaultMaxPending], [DefaultMaxPendingBytes]). Past either,
	// a request is shed: 503 with Retry-After at once.
	MaxPending      int
	MaxPendingBytes int64
	// SSEMaxCloseRate caps how many event subscribers per second the drain
	// closes, paced over its budget (SSE_MAX_CLOSE_RATE; zero: drain's
	// default). SSECloseAtDeadline (SSE_MAX_CLOSE_RATE=off) paces nothing:
	// every subscriber is closed at once near the drain deadline, as a
	// server that closes everything at its deadline does, for comparison.
	SSEMaxCloseRate    float64
	SSECloseAtDeadline bool
}

// ConfigError names an environment variable and the value refused.
type ConfigError struct {
	Var, Value, Problem string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("gateway: %s=%q: %s", e.Var, e.Value, e.Problem)
}

// configFromEnv reads HTTP_ADDR, ROOM_GRPC_ADDRS, REQUEST_TIMEOUT,
// MAX_PENDING and MAX_PENDING_BYTES; an error is a *ConfigError naming the
// variable. The request deadline must leave the drain (lcfg) time to wait
// for a request that starts just before intake closes.
func configFromEnv(getenv func(string) string, lcfg lifecycle.Config) (Config, error) {
	c := Config{HTTPAddr: getenv("HTTP_ADDR"), RequestTimeout: DefaultRequestTimeout,
		MaxPending: DefaultMaxPending, MaxPendingBytes: DefaultMaxPendingBytes}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return Config{}, &ConfigError{Var: "HTTP_ADDR", Value: c.HTTPAddr, Problem: "want host:port or :port"}
	}
	if v := getenv("REQUEST_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Config{}, &ConfigError{Var: "REQUEST_TIMEOUT", Value: v, Problem: "want a positive duration such as 15s"}
		}
		c.RequestTimeout = d
	}
	if v := getenv("ATTEMPT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Config{}, &ConfigError{Var: "ATTEMPT_TIMEOUT", Value: v, Problem: "want a positive duration such as 1s"}
		}
		c.AttemptTimeout = d
	}
	if err := c.checkAttemptTimeout(); err != nil {
		return Config{}, err
	}
	if budget := lcfg.DrainTimeout - lcfg.DrainDelay; lcfg.DrainTimeout > 0 && c.RequestTimeout >= budget {
		problem := fmt.Sprintf("want less than DRAIN_TIMEOUT %s minus DRAIN_DELAY %s, so the drain can wait for a request", lcfg.DrainTimeout, lcfg.DrainDelay)
		if getenv("REQUEST_TIMEOUT") == "" {
			problem += unsetNote("REQUEST_TIMEOUT", DefaultRequestTimeout)
		}
		return Config{}, &ConfigError{Var: "REQUEST_TIMEOUT", Value: c.RequestTimeout.String(), Problem: problem}
	}
	if v := getenv("MAX_PENDING"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Config{}, &ConfigError{Var: "MAX_PENDING", Value: v, Problem: "want a positive number of requests"}
		}
		c.MaxPending = n
	}
	if v := getenv("MAX_PENDING_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < minPendingBytes {
			return Config{}, &ConfigError{Var: "MAX_PENDING_BYTES", Value: v, Problem: fmt.Sprintf("want a number of bytes of at least %d (one request)", minPendingBytes)}
		}
		c.MaxPendingBytes = n
	}
	if v := getenv("SSE_MAX_CLOSE_RATE"); v == "off" {
		c.SSECloseAtDeadline = true
	} else if v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || !(r > 0) || math.IsInf(r, 0) {
			return Config{}, &ConfigError{Var: "SSE_MAX_CLOSE_RATE", Value: v, Problem: "want a positive number of closes per second, or off"}
		}
		c.SSEMaxCloseRate = r
	}
	raw := getenv("ROOM_GRPC_ADDRS")
	if strings.HasPrefix(strings.TrimSpace(raw), "dns:///") {
		c.DNSTarget = strings.TrimSpace(raw)
		if err := checkHostPort(strings.TrimPrefix(c.DNSTarget, "dns:///")); err != nil {
			return Config{}, &ConfigError{Var: "ROOM_GRPC_ADDRS", Value: raw, Problem: err.Error()}
		}
		return c, nil
	}
	addrs, err := parseAddrs(raw)
	if err != nil {
		return Config{}, &ConfigError{Var: "ROOM_GRPC_ADDRS", Value: raw, Problem: err.Error()}
	}
	c.Backends = addrs
	return c, nil
}

// checkAttemptTimeout refuses an attempt budget that is not shorter than
// the request's: a stalled backend would then hold the whole request.
func (c Config) checkAttemptTimeout() error {
	if c.attemptTimeout() >= c.RequestTimeout {
		problem := fmt.Sprintf("want less than REQUEST_TIMEOUT %s, so a stalled backend is left while the request can still be served", c.RequestTimeout)
		if c.AttemptTimeout == 0 {
			problem += unsetNote("ATTEMPT_TIMEOUT", DefaultAttemptTimeout)
		}
		return &ConfigError{Var: "ATTEMPT_TIMEOUT", Value: c.attemptTimeout().String(), Problem: problem}
	}
	return nil
}

// unsetNote ends the problem of a refused default: the variable was never
// set, so the error says what it stood for and that setting it is the fix.
func unsetNote(env string, def time.Duration) string {
	return fmt.Sprintf(" (%s is unset and defaults to %s: set it)", env, def)
}

// attemptTimeout is AttemptTimeout or its default.
func (c Config) attemptTimeout() time.Duration {
	if c.AttemptTimeout > 0 {
		return c.AttemptTimeout
	}
	return DefaultAttemptTimeout
}

// parseAddrs splits a comma-separated list of host:port. An empty list, an
// empty item, a malformed or a repeated address is an error: each would
// silently change how traffic is spread.
func parseAddrs(raw string) ([]string, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("required: a comma-separated list of room-service gRPC addresses (host:port), or one dns:///host:port")
	}
	seen := make(map[string]bool)
	var addrs []string
	for i, a := range strings.Split(raw, ",") {
		a = strings.TrimSpace(a)
		if err := checkHostPort(a); err != nil {
			return nil, fmt.Errorf("item %d %q: %w", i+1, a, err)
		}
		if seen[a] {
			return nil, fmt.Errorf("item %d %q: listed twice", i+1, a)
		}
		seen[a] = true
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// checkHostPort accepts host:port with a non-empty host and a port in 1–65535.
func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("want host:port")
	}
	if host == "" {
		return fmt.Errorf("want a host before the port")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q: want 1 to 65535", port)
	}
	return nil
}

// lifecycleEnv is getenv with the gateway's default SERVICE_NAME, so that
// lifecycle.ConfigFromEnv stays the one place that parses the rest.
func lifecycleEnv(getenv func(string) string) func(string) string {
	return func(k string) string {
		if v := getenv(k); v != "" || k != "SERVICE_NAME" {
			return v
		}
		return DefaultService
	}
}
