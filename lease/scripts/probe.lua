-- probe: readiness check of the lease machinery. Runs a script (so scripting
-- works) and reads the session without writing.
-- KEYS[1] node key; ARGV[1] epoch
-- Returns the session's PTTL in ms if it is this epoch's (0 if it has no
-- TTL: written by something else than a session), -1 if it is another's,
-- -2 if it is missing.
local cur = redis.call('HGET', KEYS[1], 'epoch')
if not cur then
  return -2
end
if cur ~= ARGV[1] then
  return -1
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  return 0 -- no TTL: not written by a session
end
return ttl
