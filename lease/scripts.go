package lease

import (
	"context"
	"embed"

	"github.com/redis/go-redis/v9"
)

// The scripts live in their own files so they read as Lua. Each touches
// keys of one hash tag only, so it runs on one Cluster slot.
var (
	//go:embed scripts/acquire.lua scripts/release.lua scripts/session.lua
	//go:embed scripts/session_renew.lua scripts/session_end.lua scripts/probe.lua
	//go:embed scripts/node_forget.lua
	scriptFiles embed.FS
	// scriptSources maps every script to its source, loaded at Start.
	scriptSources = map[*redis.Script]string{}

	acquireScript      = newScript("acquire")
	releaseScript      = newScript("release")
	sessionScript      = newScript("session")
	sessionRenewScript = newScript("session_renew")
	sessionEndScript   = newScript("session_end")
	probeScript        = newScript("probe")
	nodeForgetScript   = newScript("node_forget")
)

func newScript(name string) *redis.Script {
	src, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err) // not embedded: every test fails at init
	}
	s := redis.NewScript(string(src))
	scriptSources[s] = string(src)
	return s
}

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
