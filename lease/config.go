package lease

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/lifecycle"
)

// Defaults for [Config].
const (
	// DefaultTTL is how long a lease lives in Redis without renewal.
	DefaultTTL = 10 * time.Second
	// DefaultRoutePrefix prefixes room:route:{ID}, the lease key.
	DefaultRoutePrefix = "room:route:"
	// DefaultFencePrefix prefixes room:fence:{ID}, the fencing counter.
	DefaultFencePrefix = "room:fence:"
	// DefaultNodePrefix prefixes room:node:{NODE}, the node heartbeat.
	DefaultNodePrefix = "room:node:"
	// MinTTL is the shortest TTL accepted: below it, network jitter alone
	// would lose leases.
	MinTTL = time.Second
	// MaxIDLen is the longest room id accepted, in bytes.
	MaxIDLen = 128
	// ProbeTimeout bounds [Manager.Probe].
	ProbeTimeout = 100 * time.Millisecond
)

// fenceRetention is how long an idle fencing counter is kept. The counter's
// floor is the server clock, so an expired counter still yields larger
// fences; retention only saves memory for rooms that are gone.
const fenceRetention = 24 * time.Hour

// Config configures a [Manager]. The zero value of every field but Node
// takes its default.
type Config struct {
	// Node is this process's node id (NODE_ID); it names the heartbeat key
	// and is written into every lease it holds. Required.
	Node string
	// Addr is the address other nodes forward a room's requests to; it is
	// written into the heartbeat and returned by [Manager.Owner].
	Addr string
	// TTL is a lease's lifetime in Redis without renewal; default
	// [DefaultTTL], at least [MinTTL].
	TTL time.Duration
	// RenewInterval is the renewer's tick; default TTL/3, must be below TTL/2
	// so that one failed tick still leaves a second chance before the
	// holder gives the lease up at TTL·2/3.
	RenewInterval time.Duration
	// CallTimeout bounds every Redis call; default and maximum TTL/6. The
	// client's options must let a call end by it (see Client settings in
	// the package doc).
	CallTimeout time.Duration
	// RoutePrefix, FencePrefix and NodePrefix prefix the keys; defaults
	// [DefaultRoutePrefix], [DefaultFencePrefix], [DefaultNodePrefix]. They
	// must not contain '{' or '}': the hash tag is the id's.
	RoutePrefix, FencePrefix, NodePrefix string
	// OnLost, if set, is called once for each lease that ends without its
	// holder choosing to (lost, or left to expire by the drain or Stop),
	// after its context is cancelled. It runs on the
	// goroutine that ended the lease: usually the renewer; an Acquire
	// caller's (or its shared acquisition's) when Acquire finds the room's
	// lease overdue and ends it before taking the room again; the drain's
	// or Stop's for leases left to expire. It must return promptly: on the
	// renewer it delays every renewal, on Acquire the caller, and an
	// Acquire of the same room on this Manager waits until OnLost and
	// OnEnd have returned (so it must not Acquire the lease's own room).
	// A panic in it is recovered and logged with the room id, and the end
	// goes on (OnEnd runs): on the renewer it would crash the process.
	OnLost func(l *Lease, cause error)
	// OnEnd, if set, is called once for every lease when this node stops
	// holding it (released, lost, left to expire, or the manager stopped),
	// right after its context is cancelled (and OnLost, if lost), before
	// Redis is told: a release's DEL comes after it. An audit log written
	// here can therefore never show the next owner's acquisition first. It
	// runs on the goroutine that ended the lease: it must not block, nor
	// Acquire the lease's own room, which waits for it to return. A
	// lease acquired in Redis but never handed to a caller (every caller
	// gave up, the gate closed or Stop ran meanwhile, a short WAIT) is
	// released without OnEnd: it never started. A panic in it is recovered
	// and logged with the room id, and the end goes on, as for OnLost.
	OnEnd func(l *Lease, cause error)
	// AcceptEviction lets Start proceed, with a warning, on a server whose
	// maxmemory-policy is not noeviction. Lease keys have a TTL, so both
	// allkeys-* and volatile-* policies may evict one under memory
	// pressure, and its room can then have two owners until the fence
	// rejects the older one's writes. By default Start refuses such a
	// server ([ErrUnsafeServer]).
	AcceptEviction bool
	// WaitReplicas is how many replicas must acknowledge an acquisition
	// (Redis WAIT) before Acquire returns the lease; default 0, no WAIT.
	// With N > 0 a failover to an acknowledging replica keeps the lease;
	// the cost is one replication round trip per acquisition. Renewals are
	// not waited for. It needs a *redis.Client (standalone, Sentinel) or a
	// *redis.ClusterClient. On Cluster the script and WAIT go to the
	// room's primary directly (WAIT counts its own connection's writes),
	// so a MOVED or ASK reply is not followed by the client: Acquire
	// refreshes the slot map and retries, within the acquisition's budget.
	//
	// WAIT gets half of the attempt's time, about CallTimeout/2 (TTL/12 by
	// default), the rest being the round trip: choose a TTL whose twelfth
	// is well above the replicas' usual lag. A short WAIT (fewer than N
	// acknowledged in time) is not retried: the lease is released and
	// Acquire fails with an error naming WaitReplicas. It is an answer, not
	// a lost call, and a replica that missed one window is usually behind
	// for longer; a retry would issue a new fence and load the lagging
	// replica again, and, since the caller's ctx does not bound a shared
	// acquisition, would end with the caller's ctx error hiding the reason.
	// The caller may call Acquire again while its own budget lasts.
	WaitReplicas int
	// HandOff says that rooms hold state the service flushes before they
	// move, in the hook of [Manager.HandOff] (which needs it). The Release
	// hook then leaves to expire any lease the hand-off did not release, as
	// it was not flushed (its next owner recovers it from snapshot and
	// log); without HandOff it releases every lease still held. A field,
	// not a side effect of building the hook, so that what the Release hook
	// does is fixed when the Manager is made.
	HandOff bool
	// Draining reports whether the process has started draining, read
	// straight from the process's state (fxlease passes the lifecycle
	// state). It is how the Manager learns of the flip: once it reports
	// true, Acquire returns [ErrDraining], an acquisition in progress
	// starts no further attempt and one whose script raced the flip is
	// released, and every heartbeat written says draining. It must be
	// cheap and must not block. Left nil, the gate closes only when the
	// drain's lease hooks begin, after the propagation delay: set it.
	Draining func() bool
	// Logger receives warnings (heartbeat failures, lost leases); default
	// slog.Default().
	Logger *slog.Logger
	// Registerer, if set, registers the lease metrics.
	Registerer prometheus.Registerer
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = c.TTL / 3
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = c.TTL / 6
	}
	if c.RoutePrefix == "" {
		c.RoutePrefix = DefaultRoutePrefix
	}
	if c.FencePrefix == "" {
		c.FencePrefix = DefaultFencePrefix
	}
	if c.NodePrefix == "" {
		c.NodePrefix = DefaultNodePrefix
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first setting that cannot keep a lease safely, naming
// the field and its value, in an error that matches lifecycle.ErrConfig.
// Zero fields are checked with their defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Node == "":
		return badConfig("lease: Config.Node is empty")
	case strings.ContainsAny(c.Node, "|{}") || strings.IndexFunc(c.Node, unicode.IsSpace) >= 0:
		return badConfig("lease: Config.Node %q contains '|', '{', '}' or whitespace", c.Node)
	case c.TTL < MinTTL:
		return badConfig("lease: Config.TTL %s is below %s", c.TTL, MinTTL)
	case c.RenewInterval <= 0 || c.RenewInterval >= c.TTL/2:
		return badConfig("lease: Config.RenewInterval %s must be above 0 and below TTL/2 (%s)", c.RenewInterval, c.TTL/2)
	case c.CallTimeout <= 0 || c.CallTimeout > c.TTL/6:
		return badConfig("lease: Config.CallTimeout %s must be above 0 and at most TTL/6 (%s)", c.CallTimeout, c.TTL/6)
	case c.WaitReplicas < 0:
		return badConfig("lease: Config.WaitReplicas %d is negative", c.WaitReplicas)
	}
	for _, p := range []struct{ name, v string }{
		{"RoutePrefix", c.RoutePrefix}, {"FencePrefix", c.FencePrefix}, {"NodePrefix", c.NodePrefix},
	} {
		if strings.ContainsAny(p.v, "{}") {
			return badConfig("lease: Config.%s %q contains '{' or '}'", p.name, p.v)
		}
	}
	if c.RoutePrefix == c.FencePrefix || c.RoutePrefix == c.NodePrefix || c.FencePrefix == c.NodePrefix {
		return badConfig("lease: Config prefixes %q, %q, %q must differ", c.RoutePrefix, c.FencePrefix, c.NodePrefix)
	}
	return nil
}

// configError is a configuration that New or Validate refuses. It matches
// lifecycle.ErrConfig without adding to its text, so that fxmodule.Run
// exits with lifecycle.ExitConfig and logs this text alone.
type configError struct{ err error }

func (e *configError) Error() string        { return e.err.Error() }
func (e *configError) Unwrap() error        { return e.err }
func (e *configError) Is(target error) bool { return target == lifecycle.ErrConfig }

func badConfig(format string, args ...any) error {
	return &configError{fmt.Errorf(format, args...)}
}

// clientLimits are the client options that decide how long one lease call
// can take, as go-redis resolved them (a MaxRetries of 0 given reads 3).
type clientLimits struct {
	options                  string // the options type, for the advice
	maxRetries               int
	readTimeout              time.Duration
	writeTimeout             time.Duration
	contextTimeoutsRespected bool
}

func limitsOf(c redis.UniversalClient) (clientLimits, bool) {
	switch cl := c.(type) {
	case *redis.Client:
		o := cl.Options()
		return clientLimits{"redis.Options", o.MaxRetries, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled}, true
	case *redis.ClusterClient:
		o := cl.Options()
		return clientLimits{"redis.ClusterOptions", o.MaxRetries, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled}, true
	case *redis.Ring:
		o := cl.Options()
		return clientLimits{"redis.RingOptions", o.MaxRetries, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled}, true
	}
	return clientLimits{}, false
}

// checkClient refuses client options under which a renewal could outlive
// the lease, all of them in one error, each with its value and the value
// wanted: more than one retry, or a socket timeout that is not within
// CallTimeout while the client ignores context deadlines. It checks rather
// than building a client of its own from the options: that would open a
// second pool beside the team's (more connections to a server that limits
// them) and leave out the hooks added to theirs (tracing, metrics).
// Client types whose options cannot be read (custom implementations) are
// accepted as they are; the per-call context deadline still applies. On
// Cluster, MOVED/ASK redirects (MaxRedirects) are not limited here: they
// are needed during resharding, and the per-call deadline bounds them.
func checkClient(c redis.UniversalClient, callTimeout time.Duration) error {
	l, ok := limitsOf(c)
	if !ok {
		return nil
	}
	limit := callTimeout.Truncate(time.Millisecond)
	var bad []string
	if l.maxRetries > 1 {
		bad = append(bad, fmt.Sprintf("MaxRetries %d: want at most 1, or a retried renewal can land after the lease expired (go-redis reads 0 as 3, -1 as none)", l.maxRetries))
	}
	if !l.contextTimeoutsRespected {
		var over []string
		for _, t := range []struct {
			name string
			v    time.Duration
		}{{"ReadTimeout", l.readTimeout}, {"WriteTimeout", l.writeTimeout}} {
			if t.v <= 0 || t.v > callTimeout { // resolved 0 and -1 mean no socket deadline at all
				over = append(over, t.name+" "+timeoutString(t.v))
			}
		}
		if len(over) > 0 {
			bad = append(bad, fmt.Sprintf("ContextTimeoutEnabled false with %s: want ContextTimeoutEnabled true, so that each call's CallTimeout (%s) bounds it, or both timeouts at most %s",
				strings.Join(over, " and "), limit, limit))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return badConfig("lease: %T options cannot keep leases: %s; e.g. %s{MaxRetries: 1, ContextTimeoutEnabled: true}",
		c, strings.Join(bad, "; "), l.options)
}

// timeoutString is a socket timeout as go-redis resolved it: 0 and below
// set no deadline.
func timeoutString(d time.Duration) string {
	if d <= 0 {
		return "unbounded"
	}
	return d.String()
}

// validateID reports whether id can name a room: not empty, at most
// [MaxIDLen] bytes, no '{', '}' (the id is the key's hash tag) and no
// whitespace.
func validateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("lease: room id is empty")
	case len(id) > MaxIDLen:
		return fmt.Errorf("lease: room id %.32q… is %d bytes; want at most %d", id, len(id), MaxIDLen)
	case strings.ContainsAny(id, "{}"):
		return fmt.Errorf("lease: room id %q contains '{' or '}'", id)
	case strings.IndexFunc(id, unicode.IsSpace) >= 0:
		return fmt.Errorf("lease: room id %q contains whitespace", id)
	}
	return nil
}
