-- Fenced snapshot of a room, then the trim of what it folds: the log
-- entries it covers and their command ids in the dedup hash. One script,
-- so a crash cannot separate the snapshot from the trim (nothing is
-- trimmed that no snapshot holds), and the fence check covers both: only
-- the holder of the current fencing token trims.
-- KEYS: 1 route, 2 snap (hash: state, seq, fence), 3 log (stream),
--       4 cmds (dedup hash command_id -> seq)
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
-- The state lists every command id at its seq, so the snapshot now answers
-- for the folded commands (see "Duplicates after trimming" in doc.go).
local folded = redis.call("XRANGE", KEYS[3], "-", ARGV[2] .. "-1")
for i = 1, #folded, 500 do
  local ids = {}
  for j = i, math.min(i + 499, #folded) do
    local fields = folded[j][2]
    for k = 1, #fields, 2 do
      if fields[k] == "cmd" then
        ids[#ids + 1] = fields[k + 1]
      end
    end
  end
  if #ids > 0 then
    redis.call("HDEL", KEYS[4], unpack(ids))
  end
end
redis.call("XTRIM", KEYS[3], "MINID", (tonumber(ARGV[2]) + 1) .. "-0")
return "ok"
