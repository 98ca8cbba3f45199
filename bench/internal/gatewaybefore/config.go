package gatewaybefore

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/drainkit/drainkit/examples/room-service/roompb"
)

// From the gateway's config.go before the request-deadline change: the
// fields and helpers the handler reads (the environment parsing is left
// out; the benchmark builds the Config).
const (
	// DefaultRequestTimeout bounds one API request's backend calls, the
	// retry and the redirect included.
	DefaultRequestTimeout = 10 * time.Second
	// HealthService is the grpc.health.v1 service name the room backends
	// report; round_robin only picks a backend SERVING it.
	HealthService = "room-service"
)

// Config is the part of the gateway's configuration the handler reads.
type Config struct {
	// Backends are room-service gRPC addresses (host:port), balanced by
	// round_robin over a static resolver.
	Backends []string
	// DNSTarget is set instead of Backends for a single "dns:///host:port".
	DNSTarget string
	// RequestTimeout bounds one API request's backend calls.
	RequestTimeout time.Duration
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

// applyDuplicate is the retired roompb status DUPLICATE (2), which
// room-service no longer sends; the old handler's comparisons with it are
// kept as they were.
const applyDuplicate roompb.ApplyResponse_Status = 2
