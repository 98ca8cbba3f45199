-- release: compare-and-DEL of one route, so a release never deletes
-- someone else's lease.
-- KEYS[1] route key; ARGV[1] the lease's route value, or with ARGV[2]
-- 'session' the start of every value of one session (node|epoch|): the
-- one case where the fence is unknown, an acquire attempt whose reply was
-- lost before the acquisition failed. The caller then holds no lease of
-- the room (one acquisition per room at a time, none registered), so any
-- value of its session is a lease nobody holds.
-- Returns 1 deleted, 0 gone, -1 someone else's.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
if cur ~= ARGV[1] and not (ARGV[2] == 'session' and string.sub(cur, 1, #ARGV[1]) == ARGV[1]) then
  return -1
end
redis.call('DEL', KEYS[1])
return 1
