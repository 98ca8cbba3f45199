package main

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/lease"
)

// The variables that say where Redis is, one per topology, each parsed by
// go-redis's own parser for it so that every option go-redis documents for
// its URLs (TLS with rediss://, db, timeouts, pool sizes) works unchanged.
// The URL is the whole connection, credentials included, so a deployment
// keeps it in one secret.
const (
	// envURL is a standalone Redis (or a managed one's endpoint):
	// redis://[user:password@]host:port[/db], rediss:// for TLS,
	// unix://[user:password@]/path.sock. See [redis.ParseURL].
	envURL = "REDIS_URL"
	// envSentinelURL is a Sentinel-managed primary:
	// redis://[sentinel-user:sentinel-password@]sentinel:26379[/db]?master_name=NAME&addr=sentinel2:26379&password=…;
	// go-redis takes the primary's own username and password from the
	// query. See [redis.ParseFailoverURL].
	envSentinelURL = "REDIS_SENTINEL_URL"
	// envClusterURL is a Redis Cluster:
	// redis://[user:password@]node1:6379?addr=node2:6379&addr=node3:6379.
	// See [redis.ParseClusterURL].
	envClusterURL = "REDIS_CLUSTER_URL"
	// envAddr was the only way before URLs; see [redisFromEnv].
	envAddr = "REDIS_ADDR"
)

// defaultDialTimeout bounds a connection attempt when the URL does not
// set dial_timeout: go-redis's 5 s would hold a start, and every call
// that needs a new connection, for longer than a lease renewal may take.
const defaultDialTimeout = time.Second

// A Cluster client's ReadTimeout and DialTimeout when the URL does not set
// them (go-redis's are 5 s): go-redis reloads the slot map without a
// context and waits for a node that does not answer a read on each of its
// tries (two: max_retries 1) and a dial, so a failover of a primary that
// hangs rather than dies is followed that much later. lease warns above
// TTL/2 each; these stay within it for every LEASE_TTL (at least MinTTL).
// They cap every attempt of the service's own calls too: its fenced writes
// may be sent again.
const (
	clusterReadTimeout = lease.MinTTL / 4
	clusterDialTimeout = lease.MinTTL / 2
)

// redisTarget is the Redis the service uses.
type redisTarget struct {
	// env is the variable that named it; "" for the embedded development
	// server.
	env string
	// redacted is its value with every password replaced by ***: the
	// only form that is logged or put in an error.
	redacted string
	secrets  []string
	// client builds the client, which connects on its first call; nil
	// when no variable named a Redis.
	client func() redis.UniversalClient
}

// String names the target for errors: the variable and its redacted value.
func (t redisTarget) String() string {
	if t.env == "" {
		return "embedded Redis at " + t.redacted
	}
	return fmt.Sprintf("%s=%q", t.env, t.redacted)
}

// redisFromEnv reads the Redis variables. At most one may be set; none
// means the embedded development server.
//
// REDIS_ADDR (host:port) is refused rather than read: it cannot carry a
// password, a user or TLS, and a service that ignored it would fall back
// to the embedded in-memory server in production, so a deployment still
// setting it fails at start and says what to set instead.
func redisFromEnv(getenv func(string) string) (redisTarget, error) {
	if v := getenv(envAddr); v != "" {
		shown, advice := redact(v), "" // it may hold a URL, password included
		if !strings.Contains(shown, "://") {
			advice = "redis://"
		}
		return redisTarget{}, &configError{Field: envAddr, Value: shown,
			Problem: fmt.Sprintf("no longer read: set %s=%s%s (with user:password@ before the host if Redis wants them)", envURL, advice, shown)}
	}
	var set []string
	for _, env := range []string{envURL, envSentinelURL, envClusterURL} {
		if getenv(env) != "" {
			set = append(set, env)
		}
	}
	switch len(set) {
	case 0:
		return redisTarget{}, nil
	case 1:
		return parseRedis(set[0], getenv(set[0]))
	}
	return redisTarget{}, &configError{Field: set[1], Value: redact(getenv(set[1])),
		Problem: fmt.Sprintf("%s is set too: set one Redis variable", set[0])}
}

// parseRedis parses raw, the value of env, into a target whose client
// follows the lease package's rules: at most one retry, call deadlines
// from contexts, a short dial timeout.
func parseRedis(env, raw string) (redisTarget, error) {
	t := redisTarget{env: env, redacted: redact(raw), secrets: secrets(raw)}
	bad := func(problem string) error {
		return &configError{Field: env, Value: t.redacted, Problem: t.scrub(problem)}
	}
	// net/url's errors quote the URL, and some quote a piece of it that,
	// in a malformed URL, may be part of the password: say only what is
	// wanted.
	if _, err := url.Parse(raw); err != nil {
		return t, bad("not a URL: want redis://[user:password@]host:port[/db]")
	}
	var err error
	switch env {
	case envURL:
		var o *redis.Options
		if o, err = redis.ParseURL(raw); err == nil {
			err = leaseSettings(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ContextTimeoutEnabled)
			t.client = func() redis.UniversalClient { return redis.NewClient(o) }
		}
	case envSentinelURL:
		var o *redis.FailoverOptions
		if o, err = redis.ParseFailoverURL(raw); err == nil {
			if o.MasterName == "" {
				err = errors.New("no master_name: want ?master_name=NAME, the name the sentinels monitor")
			} else {
				err = leaseSettings(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ContextTimeoutEnabled)
			}
			t.client = func() redis.UniversalClient { return redis.NewFailoverClient(o) }
		}
	case envClusterURL:
		var o *redis.ClusterOptions
		if o, err = redis.ParseClusterURL(raw); err == nil {
			o.ReadTimeout = cmp.Or(o.ReadTimeout, clusterReadTimeout)
			o.DialTimeout = cmp.Or(o.DialTimeout, clusterDialTimeout)
			err = leaseSettings(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ContextTimeoutEnabled)
			t.client = func() redis.UniversalClient {
				c := redis.NewClusterClient(o)
				c.AddHook(followFailover{c})
				// And on each node's client: a call on MasterForKey's
				// (REDIS_WAIT_REPLICAS's writes) passes no cluster hook.
				c.OnNewNode(func(n *redis.Client) { n.AddHook(followFailover{c}) })
				return c
			}
		}
	}
	if err != nil {
		return t, bad(err.Error())
	}
	return t, nil
}

// leaseSettings fills in what the URL left unset and refuses what would
// let one Redis call outlive a lease's renewal budget: more than one retry.
// Contexts always bound calls (go-redis ignores their deadlines otherwise).
// One dial per call, unless a Sentinel or Cluster URL says otherwise
// (dialer_retries, which go-redis reads from those only): a
// refused connection then says so, and a Cluster client's slot map reload
// passes a dead primary at once (docs/leases.md, "The client you give it").
func leaseSettings(maxRetries, dialerRetries *int, dialTimeout *time.Duration, contextTimeout *bool) error {
	switch {
	case *maxRetries > 1:
		return fmt.Errorf("max_retries=%d: leases allow at most 1 (-1 for none)", *maxRetries)
	case *maxRetries == 0: // unset: go-redis would retry 3 times
		*maxRetries = 1
	}
	if *dialerRetries <= 0 { // unset, or -1, which go-redis reads alike: it would dial 5 times, 100 ms apart
		*dialerRetries = 1
	}
	if *dialTimeout == 0 {
		*dialTimeout = defaultDialTimeout
	}
	*contextTimeout = true
	return nil
}

// scrub replaces every password of the target in s with ***. go-redis's
// errors and log lines do not quote passwords today; scrubbing whatever
// the service prints that came from go-redis keeps it so whatever a later
// version writes.
func (t redisTarget) scrub(s string) string {
	for _, p := range t.secrets {
		s = strings.ReplaceAll(s, p, "***")
	}
	return s
}

// scrubErr is err with the target's passwords scrubbed from its text; err
// itself, so errors.Is still sees redis.Nil and the like, when its text
// holds none.
func (t redisTarget) scrubErr(err error) error {
	if err == nil || t.scrub(err.Error()) == err.Error() {
		return err
	}
	return &scrubbedError{msg: t.scrub(err.Error()), err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// secretParams are the query parameters go-redis reads a password from.
var secretParams = regexp.MustCompile(`(?i)((?:^|[?&])(?:sentinel_)?password=)[^&#]*`)

const redactMark = "REDACTEDPASSWORD" // letters only: url.URL.String leaves it as is

// redact is raw with every password replaced by ***.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return redactText(raw)
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), redactMark)
	}
	u.RawQuery = secretParams.ReplaceAllString(u.RawQuery, "${1}"+redactMark)
	// A password parameter after a '#' is in the fragment, which go-redis
	// ignores but a log line would show: the whole text is scrubbed too.
	return secretParams.ReplaceAllString(strings.ReplaceAll(u.String(), redactMark, "***"), "${1}***")
}

// redactText redacts what url.Parse cannot take apart, or takes apart in
// a way that may put a password elsewhere than in the user info ("u:p/w@h"
// is host "u", port "p"; "u:p@h" without a scheme is opaque): everything
// between the user name and the last @ goes.
func redactText(raw string) string {
	s := secretParams.ReplaceAllString(raw, "${1}***")
	if user, _, at, ok := textUserinfo(s); ok {
		return user + ":***" + s[at:]
	}
	return s
}

// textUserinfo splits raw as text at the first colon of its user info,
// which runs from after "://" (or the start) to the last @: user is raw up
// to that colon, password what follows up to at, the index of the @.
func textUserinfo(raw string) (user, password string, at int, ok bool) {
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + len("://")
	}
	at = strings.LastIndex(raw, "@")
	if at < start {
		return "", "", 0, false
	}
	name, password, ok := strings.Cut(raw[start:at], ":")
	return raw[:start] + name, password, at, ok
}

// secrets are the passwords in raw, as written and decoded, so scrub finds
// them in either form.
func secrets(raw string) []string {
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		out = append(out, p)
		for _, unescape := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
			if d, err := unescape(p); err == nil && d != p {
				out = append(out, d)
			}
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Host == "" {
		if _, p, _, ok := textUserinfo(raw); ok { // as redactText splits it
			add(p)
		}
	} else if p, ok := u.User.Password(); ok {
		add(p)
	}
	for _, m := range secretParams.FindAllStringSubmatchIndex(raw, -1) {
		add(raw[m[3]:m[1]])
	}
	return out
}
