-- release: compare-and-DEL, for a batch of leases, so a release never
-- deletes someone else's lease.
-- KEYS[i] route key (on Cluster, all in one slot); ARGV[i] our route value
-- for KEYS[i]
-- Returns one status per key, in KEYS order: 1 deleted, 0 gone, -1 stolen.
local res = {}
for i = 1, #KEYS do
  local cur = redis.call('GET', KEYS[i])
  if not cur then
    res[i] = 0
  elseif cur ~= ARGV[i] then
    res[i] = -1
  else
    redis.call('DEL', KEYS[i])
    res[i] = 1
  end
end
return res
