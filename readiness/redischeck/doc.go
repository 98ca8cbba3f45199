// Package redischeck is the readiness check of a Redis server. It is a
// package of its own so that a service without Redis does not link go-redis
// through readiness.
//
// # Tier
//
// [Ping] returns a gating [readiness.Check]: right for the Redis a replica
// cannot serve without (its room leases). A Redis shared by every replica
// as a cache is an optional dependency: gating on it would make every
// replica unready in the same second it degrades. Report it instead:
//
//	cache := redischeck.Ping(rdb)
//	cache.Name, cache.Tier = "cache", readiness.Informational
//	reg.Add(cache)
package redischeck
