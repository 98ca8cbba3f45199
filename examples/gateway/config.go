package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Defaults for [Config].
const (
	// DefaultHTTPAddr is where the API and the health endpoints listen.
	DefaultHTTPAddr = ":13000"
	// DefaultService is the service name in logs and health bodies.
	DefaultService = "gateway-service"
	// DefaultRequestTimeout bounds one API request's backend calls, the
	// retry and the redirect included. It is well under the default
	// DRAIN_TIMEOUT, so a request in flight at SIGTERM ends before the drain does.
	DefaultRequestTimeout = 10 * time.Second
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
	// RequestTimeout bounds one API request's backend calls; zero means
	// [DefaultRequestTimeout].
	RequestTimeout time.Duration
}

// ConfigError names an environment variable and the value refused.
type ConfigError struct {
	Var, Value, Problem string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("gateway: %s=%q: %s", e.Var, e.Value, e.Problem)
}

// configFromEnv reads HTTP_ADDR and ROOM_GRPC_ADDRS; an error is a
// *ConfigError naming the variable.
func configFromEnv(getenv func(string) string) (Config, error) {
	c := Config{HTTPAddr: getenv("HTTP_ADDR"), RequestTimeout: DefaultRequestTimeout}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return Config{}, &ConfigError{Var: "HTTP_ADDR", Value: c.HTTPAddr, Problem: "want host:port or :port"}
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
