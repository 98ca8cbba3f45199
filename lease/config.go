package lease

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainkit/drainkit/internal/configerr"
)

// Defaults for [Config].
const (
	// DefaultTTL is the session's lifetime without renewal: a crashed
	// node's rooms are free at most this long after its last renewal.
	// docs/leases.md weighs it against what a pause or a Redis stall costs.
	DefaultTTL         = time.Second
	DefaultRoutePrefix = "room:route:" // the lease key, room:route:{ID}
	DefaultFencePrefix = "room:fence:" // the fencing counter, room:fence:{ID}
	DefaultNodePrefix  = "room:node:"  // the node's session, room:node:{NODE}
	// MinTTL is the shortest TTL accepted: below it, jitter alone loses leases.
	MinTTL       = time.Second
	MaxIDLen     = 128 // bytes of a room id, and of Config.Node
	ProbeTimeout = 100 * time.Millisecond
)

// minCallStep is the least RenewInterval and CallTimeout: a duration
// given as a bare number (1 for 1s) is nanoseconds, which would renew or
// retry in a busy loop.
const minCallStep = 10 * time.Millisecond

// fenceRetention is how long an idle fencing counter is kept; an expired
// one still yields larger fences, as its floor is the server clock.
const fenceRetention = 24 * time.Hour

// Config configures a [Manager]. The zero value of every field but Node
// takes its default. [New] checks it before anything else and refuses a
// bad one naming the field and the value; there is no Validate method, so
// that a config is refused in one place, with one error.
type Config struct {
	// Node is this process's node id (NODE_ID), naming its session key and
	// written into every route it takes. Required; at most [MaxIDLen] bytes.
	Node string
	// Addr is where other nodes forward a room's requests ([Manager.Owner],
	// [Manager.Place]); empty if none do, and they then get "".
	Addr string
	// TTL is the session's lifetime without renewal; default
	// [DefaultTTL], at least [MinTTL]. The node gives its leases up at
	// TTL·2/3 after its last confirmed renewal.
	TTL time.Duration
	// RenewInterval is the session renewer's tick; default TTL/6 (one
	// call, whatever the rooms held), below TTL/3 so that a failed tick
	// leaves a second chance before the TTL·2/3 deadline; the last comes
	// a quarter interval before it. At least 10ms.
	RenewInterval time.Duration
	// CallTimeout bounds every Redis call; default and maximum TTL/6, at
	// least 10ms.
	CallTimeout time.Duration
	// RoutePrefix, FencePrefix and NodePrefix prefix the keys (defaults
	// above); no '{' or '}', as the hash tag is the id's.
	RoutePrefix, FencePrefix, NodePrefix string
	// OnLost, if set, is called once for each lease that ends without its
	// holder choosing to (lost, or left to expire), after its context is
	// cancelled, on the goroutine that ended it. It must return promptly
	// and call neither Acquire nor Stop: losing a session and Stop wait for
	// these hooks, and an Acquire meanwhile waits for the loss (within its
	// ctx, up to two TTLs, then fails). A panic in it is logged.
	OnLost func(l *Lease, cause error)
	// OnEnd, if set, is called once for every lease that ends, after OnLost
	// and before Redis is told, so an audit log written here never shows
	// the next owner first. OnLost's rules apply.
	OnEnd func(l *Lease, cause error)
	// AcceptEviction lets Start proceed, with a warning, on a server whose
	// maxmemory-policy may evict lease keys ([ErrUnsafeServer] otherwise).
	AcceptEviction bool
	// WaitReplicas is how many replicas must acknowledge an acquisition
	// (Redis WAIT) before Acquire returns it. See docs/leases.md.
	WaitReplicas int
	Logger       *slog.Logger          // default slog.Default()
	Registerer   prometheus.Registerer // if set, registers the lease metrics
}

func (c Config) withDefaults() Config {
	c.TTL = cmp.Or(c.TTL, DefaultTTL)
	c.RenewInterval = cmp.Or(c.RenewInterval, c.TTL/6)
	c.CallTimeout = cmp.Or(c.CallTimeout, c.TTL/6)
	c.RoutePrefix = cmp.Or(c.RoutePrefix, DefaultRoutePrefix)
	c.FencePrefix = cmp.Or(c.FencePrefix, DefaultFencePrefix)
	c.NodePrefix = cmp.Or(c.NodePrefix, DefaultNodePrefix)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// validate reports the first setting that cannot keep a lease safely, by
// field and value, in an error matching lifecycle.ErrConfig, for New.
func (c Config) validate() error {
	c = c.withDefaults()
	switch {
	case c.Node == "":
		return configerr.Errorf("lease: Config.Node is empty")
	case len(c.Node) > MaxIDLen:
		return configerr.Errorf("lease: Config.Node %.32q… (the node id; NODE_ID under fxlease): %d bytes; want at most %d", c.Node, len(c.Node), MaxIDLen)
	case strings.ContainsAny(c.Node, "|{}") || strings.IndexFunc(c.Node, unicode.IsSpace) >= 0:
		return configerr.Errorf("lease: Config.Node %q (the node id; NODE_ID under fxlease) contains '|', '{', '}' or whitespace", c.Node)
	case c.TTL < MinTTL:
		return configerr.Errorf("lease: Config.TTL %s is below MinTTL (%s): set it to %s or more, or 0 for DefaultTTL (%s)", c.TTL, MinTTL, MinTTL, DefaultTTL)
	case c.RenewInterval < minCallStep || c.RenewInterval >= c.TTL/3:
		return configerr.Errorf("lease: Config.RenewInterval %s must be at least %s and below TTL/3 (%s)", c.RenewInterval, minCallStep, c.TTL/3)
	case c.CallTimeout < minCallStep || c.CallTimeout > c.TTL/6:
		return configerr.Errorf("lease: Config.CallTimeout %s must be at least %s and at most TTL/6 (%s)", c.CallTimeout, minCallStep, c.TTL/6)
	case c.WaitReplicas < 0:
		return configerr.Errorf("lease: Config.WaitReplicas %d is negative", c.WaitReplicas)
	}
	for _, p := range []struct{ name, v string }{
		{"RoutePrefix", c.RoutePrefix}, {"FencePrefix", c.FencePrefix}, {"NodePrefix", c.NodePrefix},
	} {
		if strings.ContainsAny(p.v, "{}") {
			return configerr.Errorf("lease: Config.%s %q contains '{' or '}'", p.name, p.v)
		}
	}
	if c.RoutePrefix == c.FencePrefix || c.RoutePrefix == c.NodePrefix || c.FencePrefix == c.NodePrefix {
		return configerr.Errorf("lease: Config prefixes %q, %q, %q must differ", c.RoutePrefix, c.FencePrefix, c.NodePrefix)
	}
	return nil
}

// validateID refuses, with [ErrInvalidID], an id that is empty, longer
// than [MaxIDLen], or holds '{', '}' (it is the key's hash tag) or whitespace.
func validateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidID)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w %.32q…: %d bytes; want at most %d", ErrInvalidID, id, len(id), MaxIDLen)
	case strings.ContainsAny(id, "{}"):
		return fmt.Errorf("%w %q: contains '{' or '}'", ErrInvalidID, id)
	case strings.IndexFunc(id, unicode.IsSpace) >= 0:
		return fmt.Errorf("%w %q: contains whitespace", ErrInvalidID, id)
	}
	return nil
}
