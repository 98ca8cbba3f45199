-- renew: compare-and-PEXPIRE, for a batch of leases. Never re-creates a
-- missing key: a lease that expired may already belong to someone else in
-- the holder's view of time.
-- KEYS[i] route key (on Cluster, all in one slot); ARGV[1] TTL ms;
-- ARGV[i+1] our route value for KEYS[i]
-- Returns one status per key, in KEYS order: 1 renewed, 0 gone, -1 stolen
-- (someone else holds it).
-- One MGET instead of a GET per key: the cost of a batch is mostly the
-- redis.call overhead. unpack() takes up to 8000 values; the caller sends
-- at most 500 keys.
local ttl = ARGV[1]
local cur = redis.call('MGET', unpack(KEYS))
local res = {}
for i = 1, #KEYS do
  local v = cur[i]
  if not v then
    res[i] = 0
  elseif v ~= ARGV[i + 1] then
    res[i] = -1
  else
    redis.call('PEXPIRE', KEYS[i], ttl)
    res[i] = 1
  end
end
return res
