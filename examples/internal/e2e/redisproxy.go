package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
)

// StartRedisProxy starts a [HoldProxy] to the cluster's Redis on a port
// the cluster never hands to a slot (a free slot's port is not listened
// on, so a kernel-chosen one could be it). The caller closes it.
func (c *Cluster) StartRedisProxy() (*HoldProxy, error) {
	u, err := url.Parse(c.cfg.RedisURL)
	if err != nil {
		return nil, errors.New("e2e: Config.RedisURL is not a redis://host:port URL")
	}
	addr, err := c.ports.Pick(1)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr[0])
	if err != nil {
		return nil, fmt.Errorf("e2e: redis proxy: %w", err)
	}
	return serveHoldProxy(ln, u.Host), nil
}

// StartRoomVia is [Cluster.StartRoomEnv] for a room-service whose Redis
// connections go through p (REDIS_URL with p's address, credentials
// kept), while its gRPC and admin ports are reached directly: p.Hold()
// then cuts this one node off from Redis, as a partition would, and the
// rest of the cluster keeps its Redis.
func (c *Cluster) StartRoomVia(ctx context.Context, slot int, p *HoldProxy, env ...string) (*Node, error) {
	via, err := redisURLVia(c.cfg.RedisURL, p.Addr())
	if err != nil {
		return nil, err
	}
	// Last: exec keeps the last value of a variable set twice.
	return c.StartRoomEnv(ctx, slot, slices.Concat(env, []string{"REDIS_URL=" + via})...)
}

// redisURLVia is redisURL with its host:port replaced by addr.
func redisURLVia(redisURL, addr string) (string, error) {
	u, err := url.Parse(redisURL)
	if err != nil || u.Host == "" {
		// Not the value itself: it may hold a password.
		return "", errors.New("e2e: Config.RedisURL is not a redis://host:port URL")
	}
	u.Host = addr
	return u.String(), nil
}
