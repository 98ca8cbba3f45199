-- heartbeat_delete: delete the node heartbeat only if it is still ours.
-- KEYS[1] node key; ARGV[1] holder
-- Returns 1 deleted, 0 gone, -1 someone else's.
local cur = redis.call('HGET', KEYS[1], 'holder')
if not cur then
  return 0
end
if cur ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
return 1
