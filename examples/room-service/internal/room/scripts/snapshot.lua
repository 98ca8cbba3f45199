-- Fenced snapshot of a room, then trim the log entries it covers.
-- KEYS: 1 route, 2 snap (hash: state, seq, fence), 3 log (stream)
-- ARGV: 1 fence (decimal), 2 seq, 3 state (JSON)
-- Returns "ok", "stale" (a snapshot at a higher seq exists; nothing written)
-- or "fenced" (the caller no longer holds the room; nothing written).
local route = redis.call("GET", KEYS[1])
if not route or string.match(route, "|(%d+)$") ~= ARGV[1] then
  return "fenced"
end
local have = tonumber(redis.call("HGET", KEYS[2], "seq") or "0")
if have > tonumber(ARGV[2]) then
  return "stale"
end
redis.call("HSET", KEYS[2], "state", ARGV[3], "seq", ARGV[2], "fence", ARGV[1])
redis.call("XTRIM", KEYS[3], "MINID", (tonumber(ARGV[2]) + 1) .. "-0")
return "ok"
