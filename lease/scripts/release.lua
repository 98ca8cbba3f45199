-- release: compare-and-DEL, for a batch of leases, so a release never
-- deletes someone else's lease.
-- KEYS[i] route key (on Cluster, all in one slot); ARGV[i] our route value
-- for KEYS[i]
-- Returns one status per key, in KEYS order: 1 deleted, 0 gone, -1 stolen.
-- One MGET for the batch, as in renew.lua (at most 500 keys).
local cur = redis.call('MGET', unpack(KEYS))
local res = {}
for i = 1, #KEYS do
  local v = cur[i]
  if not v then
    res[i] = 0
  elseif v ~= ARGV[i] then
    res[i] = -1
  else
    redis.call('DEL', KEYS[i])
    res[i] = 1
  end
end
return res
