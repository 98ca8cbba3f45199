package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// minRedisVersion is the oldest server the scripts run on: acquire.lua
// reads TIME and then writes, which servers before 5.0 refuse.
var minRedisVersion = [3]int{5, 0, 0}

// checkServers refuses, on every server leases are written to, one the
// scripts cannot run on or whose maxmemory-policy may evict lease keys
// (unless Config.AcceptEviction), and warns of what it cannot read: a
// managed Redis may refuse INFO or CONFIG.
func (m *Manager) checkServers(ctx context.Context) error {
	check := func(ctx context.Context, c *redis.Client) error { return m.checkServer(ctx, c, c.Options().Addr) }
	switch c := m.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, check)
	case *redis.Client:
		return check(ctx, c)
	}
	return m.checkServer(ctx, m.client, "the server")
}

func (m *Manager) checkServer(ctx context.Context, c redis.UniversalClient, addr string) error {
	var info, cfg map[string]string
	err := m.retry(ctx, nil, func(ctx context.Context) error {
		text, err := c.Info(ctx).Result() // the default sections hold server and memory
		info = parseInfo(text)
		return err
	})
	policy := info["maxmemory_policy"]
	if policy == "" && (err == nil || !retryable(err)) {
		err = m.retry(ctx, nil, func(ctx context.Context) (err error) {
			cfg, err = c.ConfigGet(ctx, "maxmemory-policy").Result()
			return err
		})
		policy = cfg["maxmemory-policy"]
	}
	if err != nil && retryable(err) {
		return fmt.Errorf("check %s: %w", addr, err)
	}
	switch version := info["redis_version"]; {
	case version == "":
		m.cfg.Logger.Warn("cannot read the Redis version (INFO); the lease scripts need Redis 5.0.0 or later",
			"addr", addr, "error", fmt.Sprint(err))
	case !atLeast(version, minRedisVersion):
		return fmt.Errorf("%w: %s runs Redis %s; the lease scripts need 5.0.0 or later (acquire.lua reads TIME before writing)",
			ErrUnsafeServer, addr, version)
	}
	switch {
	case policy == "":
		m.cfg.Logger.Warn("cannot read maxmemory-policy (INFO and CONFIG GET refused); unless it is noeviction, Redis may evict a lease key and give its room two owners",
			"addr", addr, "error", fmt.Sprint(err))
	case policy == "noeviction":
	case m.cfg.AcceptEviction:
		m.cfg.Logger.Warn("maxmemory-policy may evict lease keys and give a room two owners; accepted by Config.AcceptEviction",
			"addr", addr, "maxmemory_policy", policy)
	default:
		return fmt.Errorf("%w: %s has maxmemory-policy %s, which may evict lease keys (they have a TTL) and give a room two owners; "+
			"set maxmemory-policy noeviction, or Config.AcceptEviction to accept the risk", ErrUnsafeServer, addr, policy)
	}
	return nil
}

// parseInfo reads the key:value lines of an INFO reply.
func parseInfo(text string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(text) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}

// atLeast reports whether version (major.minor.patch) is at least min. An
// unparseable version passes: the scripts themselves fail loudly.
func atLeast(version string, min [3]int) bool {
	for i, p := range strings.SplitN(version, ".", 3) {
		n, err := strconv.Atoi(strings.TrimFunc(p, func(r rune) bool { return r < '0' || r > '9' }))
		if err != nil {
			return true
		}
		if n != min[i] {
			return n > min[i]
		}
	}
	return true
}

// errShortWait is wrapped when fewer replicas than Config.WaitReplicas
// acknowledged an acquisition.
var errShortWait = errors.New("replicas did not acknowledge in time")
