package lease

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts live in their own files so they read as Lua. Each touches
// keys of one hash tag only, so it runs on one Cluster slot.

var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/release_holder.lua
	releaseHolderSrc string
	//go:embed scripts/heartbeat.lua
	heartbeatSrc string
	//go:embed scripts/heartbeat_delete.lua
	heartbeatDeleteSrc string
	//go:embed scripts/probe.lua
	probeSrc string

	acquireScript         = redis.NewScript(acquireSrc)
	renewScript           = redis.NewScript(renewSrc)
	releaseScript         = redis.NewScript(releaseSrc)
	releaseHolderScript   = redis.NewScript(releaseHolderSrc)
	heartbeatScript       = redis.NewScript(heartbeatSrc)
	heartbeatDeleteScript = redis.NewScript(heartbeatDeleteSrc)
	probeScript           = redis.NewScript(probeSrc)
)

// scriptSources are the sources of every script, for loading at Start.
var scriptSources = []string{acquireSrc, renewSrc, releaseSrc, releaseHolderSrc, heartbeatSrc, heartbeatDeleteSrc, probeSrc}
