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
// reads TIME and then writes, which servers before 5.0 refuse unless the
// script asks for effects replication itself.
var minRedisVersion = [3]int{5, 0, 0}

// checkServers runs checkServer on every server the client writes leases
// to: every master on Cluster, every shard on Ring.
func (m *Manager) checkServers(ctx context.Context) error {
	switch c := m.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return m.checkServer(ctx, n, n.Options().Addr) })
	case *redis.Ring:
		return c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return m.checkServer(ctx, n, n.Options().Addr) })
	case *redis.Client:
		return m.checkServer(ctx, c, c.Options().Addr)
	default:
		return m.checkServer(ctx, c, "the server")
	}
}

// checkServer refuses a server the scripts cannot run on, or whose
// maxmemory-policy may evict lease keys (unless Config.AcceptEviction),
// and warns about what it cannot read: a managed Redis may refuse INFO
// sections or CONFIG.
func (m *Manager) checkServer(ctx context.Context, c redis.UniversalClient, addr string) error {
	info := func(section string) (map[string]string, error) {
		var text string
		err := m.retry(ctx, func(ctx context.Context) (err error) {
			text, err = c.Info(ctx, section).Result()
			return err
		})
		return parseInfo(text), err
	}
	srv, err := info("server")
	switch version := srv["redis_version"]; {
	case err != nil && retryable(err):
		return fmt.Errorf("check %s: %w", addr, err)
	case version == "":
		m.cfg.Logger.Warn("cannot read the Redis version (INFO server); the lease scripts need Redis "+formatVersion(minRedisVersion)+" or later",
			"addr", addr, "error", errString(err))
	case !atLeast(version, minRedisVersion):
		return fmt.Errorf("%w: %s runs Redis %s; the lease scripts need %s or later (acquire.lua reads TIME before writing)",
			ErrUnsafeServer, addr, version, formatVersion(minRedisVersion))
	}
	policy, err := m.evictionPolicy(ctx, c, info)
	switch {
	case err != nil && retryable(err):
		return fmt.Errorf("check %s: %w", addr, err)
	case policy == "":
		m.cfg.Logger.Warn("cannot read maxmemory-policy (INFO memory and CONFIG GET refused); unless it is noeviction, Redis may evict a lease key and give its room two owners",
			"addr", addr, "error", errString(err))
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

// evictionPolicy reads maxmemory-policy from INFO memory, or else from
// CONFIG GET; "" if neither answers.
func (m *Manager) evictionPolicy(ctx context.Context, c redis.UniversalClient, info func(string) (map[string]string, error)) (string, error) {
	mem, err := info("memory")
	if p := mem["maxmemory_policy"]; p != "" {
		return p, nil
	}
	if err != nil && retryable(err) {
		return "", err
	}
	var cfg map[string]string
	err = m.retry(ctx, func(ctx context.Context) (err error) {
		cfg, err = c.ConfigGet(ctx, "maxmemory-policy").Result()
		return err
	})
	return cfg["maxmemory-policy"], err
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

// atLeast reports whether version (major.minor.patch, as INFO reports it)
// is at least min. An unparseable version is taken as new enough: the
// scripts themselves fail loudly if it is not.
func atLeast(version string, min [3]int) bool {
	parts := strings.SplitN(version, ".", 3)
	for i, p := range parts {
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

func formatVersion(v [3]int) string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}

// errShortWait is wrapped when fewer replicas than Config.WaitReplicas
// acknowledged an acquisition.
var errShortWait = errors.New("replicas did not acknowledge in time")
