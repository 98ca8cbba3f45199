-- renew: compare-and-PEXPIRE, for a batch of leases. Never re-creates a
-- missing key: a lease that expired may already belong to someone else in
-- the holder's view of time.
-- KEYS[i] route key (on Cluster, all in one slot); ARGV[1] TTL ms;
-- ARGV[i+1] our route value for KEYS[i]
-- Returns one status per key, in KEYS order: 1 renewed, 0 gone, -1 stolen
-- (someone else holds it).
local ttl = ARGV[1]
local res = {}
for i = 1, #KEYS do
  local cur = redis.call('GET', KEYS[i])
  if not cur then
    res[i] = 0
  elseif cur ~= ARGV[i + 1] then
    res[i] = -1
  else
    redis.call('PEXPIRE', KEYS[i], ttl)
    res[i] = 1
  end
end
return res
