-- session_renew: extend the node's session, if it is still this epoch's,
-- and set its state. One call per renewal, whatever the rooms held.
-- KEYS[1] node key; ARGV[1] epoch, ARGV[2] state, ARGV[3] TTL ms
-- Returns 1 renewed, 0 gone or another epoch's: never re-created, as an
-- ended epoch's rooms may already be someone else's.
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'state', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
