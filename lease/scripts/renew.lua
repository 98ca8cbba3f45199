-- renew: compare-and-PEXPIRE. Never re-creates a missing key: a lease that
-- expired may already belong to someone else in the holder's view of time.
-- KEYS[1] route key; ARGV[1] our route value; ARGV[2] TTL ms
-- Returns 1 renewed, 0 gone, -1 stolen (someone else holds it).
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
if cur ~= ARGV[1] then
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
