-- probe: readiness check of the lease machinery. Runs a script (so scripting
-- works) and reads the session without writing.
-- KEYS[1] node key; ARGV[1] epoch
-- Returns the session's PTTL in ms if it is this epoch's, -1 if it is
-- another's, -2 if it is missing, -3 if it has no TTL (a session always
-- has one: something else wrote it).
local cur = redis.call('HGET', KEYS[1], 'epoch')
if not cur then
  return -2
end
if cur ~= ARGV[1] then
  return -1
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -1 then
  return -3
end
return ttl
