-- Fenced trim of a room's log up to a snapshot held elsewhere (MySQL): the
-- log entries it covers and their command ids in the dedup hash. The
-- caller runs it only after the snapshot is stored, so nothing is trimmed
-- that no snapshot holds; the fence check makes sure only the holder of
-- the current fencing token trims.
-- KEYS: 1 route, 2 log (stream), 3 cmds (dedup hash command_id -> seq)
-- ARGV: 1 fence (decimal), 2 seq
-- Returns "ok" or "fenced" (the caller no longer holds the room; nothing
-- trimmed).
local route = redis.call("GET", KEYS[1])
if not route or string.match(route, "|(%d+)$") ~= ARGV[1] then
  return "fenced"
end
local folded = redis.call("XRANGE", KEYS[2], "-", ARGV[2] .. "-1")
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
    redis.call("HDEL", KEYS[3], unpack(ids))
  end
end
redis.call("XTRIM", KEYS[2], "MINID", (tonumber(ARGV[2]) + 1) .. "-0")
return "ok"
