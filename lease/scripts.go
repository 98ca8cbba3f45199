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
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/session.lua
	sessionSrc string
	//go:embed scripts/session_renew.lua
	sessionRenewSrc string
	//go:embed scripts/session_end.lua
	sessionEndSrc string
	//go:embed scripts/probe.lua
	probeSrc string

	acquireScript      = redis.NewScript(acquireSrc)
	releaseScript      = redis.NewScript(releaseSrc)
	sessionScript      = redis.NewScript(sessionSrc)
	sessionRenewScript = redis.NewScript(sessionRenewSrc)
	sessionEndScript   = redis.NewScript(sessionEndSrc)
	probeScript        = redis.NewScript(probeSrc)
)

// scriptSources are the sources of every script, for loading at Start.
var scriptSources = []string{acquireSrc, releaseSrc, sessionSrc, sessionRenewSrc, sessionEndSrc, probeSrc}
