package redischeck_test

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/redischeck"
)

func ExamplePing() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // dialled at the first probe
	defer client.Close()
	// A shared cache: report it, do not drain every replica when it degrades.
	cache := redischeck.Ping(client)
	cache.Name, cache.Tier = "cache", readiness.Informational
	fmt.Println(cache.Name, cache.Tier, cache.Timeout)
	// Output: cache informational 200ms
}
