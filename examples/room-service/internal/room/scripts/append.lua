-- Fenced append of one command to a room's log.
-- KEYS: 1 route, 2 cmds (dedup hash command_id -> seq), 3 seq counter,
--       4 log (stream, entry id "<seq>-1"), 5 outbox (list of JSON events)
-- ARGV: 1 fence (decimal), 2 command_id, 3 op, 4 room id
-- Returns {"applied", seq}, {"duplicate", seq} or {"fenced", 0}.
-- The duplicate check comes first: a command already in the log is
-- answered "duplicate" whoever asks, so a retry of a write whose reply was
-- lost is never told "fenced" (which says nothing was written) after the
-- room has moved on. Only a new command needs the fence. A command folded
-- into a snapshot has left the hash: the owner answers it from the
-- recovered state before calling this script (doc.go, "Duplicates after
-- trimming").
local prior = redis.call("HGET", KEYS[2], ARGV[2])
if prior then
  -- Written again, unchanged, so that this call replicates: WAIT's
  -- documented contract counts the writes of its own connection, and so
  -- covers the first application only if this call wrote too (Redis 7.0
  -- counts earlier writes of other connections as well; not promised).
  redis.call("HSET", KEYS[2], ARGV[2], prior)
  return {"duplicate", tonumber(prior)}
end
local route = redis.call("GET", KEYS[1])
if not route or string.match(route, "|(%d+)$") ~= ARGV[1] then
  return {"fenced", 0}
end
local seq = redis.call("INCR", KEYS[3])
redis.call("XADD", KEYS[4], seq .. "-1", "cmd", ARGV[2], "op", ARGV[3])
redis.call("HSET", KEYS[2], ARGV[2], seq)
redis.call("RPUSH", KEYS[5], cjson.encode({room = ARGV[4], seq = seq, command_id = ARGV[2], op = ARGV[3]}))
return {"applied", seq}
