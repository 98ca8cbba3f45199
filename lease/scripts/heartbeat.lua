-- heartbeat: write the node heartbeat hash and its TTL.
-- KEYS[1] node key; ARGV[1] holder, ARGV[2] state, ARGV[3] addr, ARGV[4] TTL ms
-- Returns the previous holder (false if none), so a second process that
-- claims the same node id can be noticed.
local prev = redis.call('HGET', KEYS[1], 'holder')
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'state', ARGV[2], 'addr', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return prev
