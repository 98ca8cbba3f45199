package redischeck_test

import (
	"fmt"

	"github.com/drainkit/drainkit/readiness"
	"github.com/drainkit/drainkit/readiness/redischeck"
)

func ExamplePing() {
	// A shared cache: report it, do not drain every replica when it degrades.
	cache := redischeck.Ping(nil) // in a service: the redis client
	cache.Name, cache.Tier = "cache", readiness.Informational
	fmt.Println(cache.Name, cache.Tier, cache.Timeout)
	// Output: cache informational 200ms
}
