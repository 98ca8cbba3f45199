package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/drainkit/drainkit/fxmodule"
	"github.com/drainkit/drainkit/lifecycle"
)

// newRedis connects to REDIS_ADDR, or starts an embedded Redis-compatible
// server when it is empty so the example runs on a fresh machine. The
// client is closed by fx after the drain (its OnStop is appended before
// the drain's, so it runs after it).
//
// Client settings follow the lease package's rules: at most one retry and
// call deadlines from contexts, so one slow Redis call cannot outlive a
// lease's renewal budget.
func newRedis(lc fx.Lifecycle, c config, m *lifecycle.Manager, log *slog.Logger) (redis.UniversalClient, error) {
	addr := c.RedisAddr
	var embedded *miniredis.Miniredis
	if addr == "" {
		embedded = miniredis.NewMiniRedis()
		if err := embedded.Start(); err != nil {
			return nil, fmt.Errorf("embedded redis: %w", err)
		}
		addr = embedded.Addr()
		log.Warn("REDIS_ADDR is empty: using an embedded in-memory Redis; for development only", "addr", addr)
	}
	rdb := redis.NewClient(&redis.Options{
		Addr:                  addr,
		MaxRetries:            1,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
	})
	lc.Append(fx.Hook{
		// A start that cannot reach Redis fails here, naming the address,
		// instead of deep inside the lease manager.
		OnStart: fxmodule.Abortable(m, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			if err := rdb.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("REDIS_ADDR=%q unreachable: %w", addr, err)
			}
			return nil
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
