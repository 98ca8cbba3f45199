package lease

import (
	"context"
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

// scriptCall is one call of a script in a pipeline: its keys and arguments.
type scriptCall struct {
	keys []string
	args []any
}

// runPipelined is go-redis's Script.Run for a pipeline, which has none: it
// sends every call of script by its SHA in one pipeline on c, with then's
// commands after them, and once more as EVAL (then's commands again) the
// calls a server answered NOSCRIPT, as a promoted replica does: its script
// cache is empty. Errors are read from each command.
func runPipelined(ctx context.Context, c redis.Cmdable, script *redis.Script, calls []scriptCall, then func(redis.Pipeliner)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	pipe := c.Pipeline()
	for i, call := range calls {
		cmds[i] = script.EvalSha(ctx, pipe, call.keys, call.args...)
	}
	if then != nil {
		then(pipe)
	}
	if _, err := pipe.Exec(ctx); err == nil {
		return cmds
	}
	again := c.Pipeline()
	for i, call := range calls {
		if err := cmds[i].Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			cmds[i] = script.Eval(ctx, again, call.keys, call.args...)
		}
	}
	if again.Len() > 0 {
		if then != nil {
			then(again)
		}
		_, _ = again.Exec(ctx)
	}
	return cmds
}
