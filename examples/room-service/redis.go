package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/lifecycle"
	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/redischeck"
)

// newRedis connects to the Redis the configuration names (redisurl.go),
// or starts an embedded Redis-compatible server when it names none, so
// the example runs on a fresh machine. The client is closed by fx after
// the drain (its OnStop is appended before the drain's, so it runs after
// it).
func newRedis(lc fx.Lifecycle, c config, m *lifecycle.Manager, log *slog.Logger) (redis.UniversalClient, error) {
	log = log.With("service", m.Config().Service, "node_id", m.Config().NodeID)
	t := c.Redis
	var embedded *miniredis.Miniredis
	if t.client == nil {
		embedded = miniredis.NewMiniRedis()
		if err := embedded.Start(); err != nil {
			return nil, fmt.Errorf("embedded redis: %w", err)
		}
		t = embeddedTarget(embedded.Addr())
		log.Warn("no REDIS_URL, REDIS_SENTINEL_URL or REDIS_CLUSTER_URL: using an embedded in-memory Redis; for development only", "addr", embedded.Addr())
	} else {
		log.Info("using redis", "from", t.env, "url", t.redacted)
	}
	rdb := t.client()
	lc.Append(fx.Hook{
		// A start that cannot reach Redis, or is refused by it, fails here,
		// naming the variable, instead of deep inside the lease manager. A
		// Redis still starting (loading its data, a cluster whose slots are
		// being assigned, as when it starts beside this service) is waited
		// for within the same 3 s.
		OnStart: fxmodule.Abortable(m, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			for {
				err := rdb.Ping(ctx).Err()
				if err == nil {
					warnFewReplicas(ctx, rdb, c.WaitReplicas, log)
					return nil
				}
				if !redisStarting(err) {
					return t.pingError(err)
				}
				select {
				case <-ctx.Done():
					return t.pingError(err)
				case <-time.After(100 * time.Millisecond):
				}
				if cl, ok := rdb.(*redis.ClusterClient); ok {
					cl.ReloadState(ctx) // go-redis reloads a map with no node only every 10 s by itself
				}
			}
		}),
		OnStop: func(context.Context) error {
			err := rdb.Close()
			if embedded != nil {
				embedded.Close()
			}
			return err
		},
	})
	return rdb, nil
}

// embeddedTarget is the embedded server at addr, with the settings a URL
// would get.
func embeddedTarget(addr string) redisTarget {
	o := &redis.Options{Addr: addr}
	_ = leaseSettings(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ContextTimeoutEnabled) // nothing set, nothing refused
	return redisTarget{redacted: addr, client: func() redis.UniversalClient { return redis.NewClient(o) }}
}

// redisCheck is redischeck.Ping with the passwords scrubbed from its
// error, which the ready body and the transition log show.
func redisCheck(rdb redis.UniversalClient, c config) readiness.Check {
	check := redischeck.Ping(rdb)
	probe := check.Probe
	check.Probe = func(ctx context.Context) error { return c.Redis.scrubErr(probe(ctx)) }
	return check
}

// redisLog sends go-redis's log lines (it has one process-wide logger;
// see redis.SetLogger) to the service's JSON logger, so one stream tells
// the whole start and stop. go-redis gives them no level; they report
// connections that failed or were dropped, which it retries or returns
// as errors that the service logs in context, hence warnings. During an
// outage it writes one per dial attempt of every pooled connection: a
// line of one format is written at most once per redisLogEvery, the next
// one saying how many were left out.
type redisLog struct {
	log *slog.Logger
	t   redisTarget
	now func() time.Time // time.Now; tests move it

	mu   sync.Mutex
	seen map[string]*logRun // by format
}

// logRun is when a format was last written and how many lines of it were
// left out since.
type logRun struct {
	at      time.Time
	skipped int
}

const redisLogEvery = 5 * time.Second

func newRedisLog(log *slog.Logger, t redisTarget) *redisLog {
	return &redisLog{log: log, t: t, now: time.Now, seen: map[string]*logRun{}}
}

func (l *redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.mu.Lock()
	now, run := l.now(), l.seen[format]
	if run != nil && now.Sub(run.at) < redisLogEvery {
		run.skipped++
		l.mu.Unlock()
		return
	}
	skipped := 0
	if run != nil {
		skipped = run.skipped
	}
	l.seen[format] = &logRun{at: now}
	l.mu.Unlock()
	attrs := []any{"component", "go-redis"}
	if skipped > 0 {
		attrs = append(attrs, "left_out_since_last", skipped)
	}
	l.log.WarnContext(ctx, l.t.scrub(fmt.Sprintf(format, v...)), attrs...)
}

// redisStarting reports whether err comes from a Redis that is still
// starting: loading its data, a cluster not serving every slot yet
// (go-redis's "cluster has no nodes" while none is assigned), or sentinels
// not monitoring the master yet.
func redisStarting(err error) bool {
	if strings.Contains(err.Error(), "redis: cluster has no nodes") || noSentinelMaster(err) {
		return true
	}
	for _, prefix := range []string{"LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

// noSentinelMaster reports whether err is a Sentinel client's failure to
// learn its master from sentinels that answered but named none for
// master_name: go-redis calls them all unreachable and joins their empty
// answers (redis.Nil) into its error. Both are read, so that a key's
// absence (redis.Nil) never matches.
func noSentinelMaster(err error) bool {
	return errors.Is(err, redis.Nil) && strings.Contains(err.Error(), "all sentinels specified in configuration are unreachable")
}

// pingError is the start's error for a PING that failed with err, which
// says what go-redis's words for a master name no sentinel knows do not.
func (t redisTarget) pingError(err error) error {
	if noSentinelMaster(err) {
		err = fmt.Errorf("the sentinels that answered name no master of master_name (misspelled, or not monitored yet): %w", err)
	}
	return fmt.Errorf("%s: PING failed: %w", t, t.scrubErr(err))
}

// followFailover has a Cluster client reload its slot map after a call
// that failed as a failover explains: go-redis reloads it by itself only
// on a redirect, or once a minute, and a dead primary sends none (go-redis
// issue 3979, open at v9.24.0). The lease manager asks after its own
// calls only; room loads share the client, and with REDIS_WAIT_REPLICAS
// write through a node's own client, so it is on those too. The reload is go-redis's: in
// the background, at most one every 200 ms. docs/leases.md ("On a Redis
// Cluster") has the argument.
type followFailover struct{ c *redis.ClusterClient }

func (h followFailover) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h followFailover) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.after(err)
		return err
	}
}

func (h followFailover) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds { // err is the first command's: a redis.Nil may hide a refusal
			if h.after(cmd.Err()) {
				break
			}
		}
		return err
	}
}

// after asks for a reload if failoverExplains(err), and reports whether it did.
func (h followFailover) after(err error) bool {
	if !failoverExplains(err) {
		return false
	}
	h.c.ReloadState(context.Background()) // it ignores the context
	return true
}

// failoverExplains reports whether err may come from a slot map that names
// a node no longer serving the slot: no reply (a failed connection, a
// timeout), or a reply saying the node serves none now (CLUSTERDOWN,
// TRYAGAIN), or another does (MOVED: a node's own client after a planned
// failover; the cluster client follows it by itself), the failures lease
// asks after. Not redis.Nil or another reply about the command, the
// caller leaving, or a closed client.
func failoverExplains(err error) bool {
	var reply redis.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, redis.ErrClosed):
		return false
	case errors.As(err, &reply):
		return redis.HasErrorPrefix(err, "CLUSTERDOWN") || redis.HasErrorPrefix(err, "TRYAGAIN") || redis.HasErrorPrefix(err, "MOVED")
	}
	return true
}

// warnFewReplicas logs a WARN when the primary of a *redis.Client has
// fewer replicas connected than REDIS_WAIT_REPLICAS asks: every command
// then fails as of unknown outcome until they connect. (A Cluster's
// primaries are not asked: each shard has its own.)
func warnFewReplicas(ctx context.Context, rdb redis.UniversalClient, want int, log *slog.Logger) {
	if want == 0 {
		return
	}
	c, ok := rdb.(*redis.Client)
	if !ok {
		return
	}
	if got, known := connectedReplicas(ctx, c); known && got < want {
		log.Warn("REDIS_WAIT_REPLICAS asks for more replicas than the primary has connected: every command fails as of unknown outcome until they connect",
			"wait_replicas", want, "connected_replicas", got)
	}
}

// connectedReplicas reads connected_slaves from the server's INFO
// replication; known is false if it could not.
func connectedReplicas(ctx context.Context, c *redis.Client) (n int, known bool) {
	n, err := strconv.Atoi(c.InfoMap(ctx, "replication").Item("Replication", "connected_slaves"))
	return n, err == nil
}
