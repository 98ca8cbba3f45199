-- release: compare-and-DEL of one route, so a release never deletes
-- someone else's lease.
-- KEYS[1] route key; ARGV[1] the lease's route value, or with ARGV[2]
-- 'session' the start of every value of one session (node|epoch|) whose
-- fence is at most ARGV[3]: the one case where the fence is unknown, an
-- acquire attempt whose reply was lost before the acquisition failed. The
-- caller then holds no lease of the room (one acquisition per room at a
-- time, none registered), and read the fence counter before: any value
-- of its session up to that fence is a lease nobody holds, and a later
-- acquisition's (a higher fence) is never deleted, however late this
-- call runs.
-- Returns 1 deleted, 0 gone, 2 replaced by a later lease of the same
-- session (this node took the room again between the lease's end and this
-- call: the value is gone all the same), -1 someone else's.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
local ofSession = ARGV[2] == 'session' and string.sub(cur, 1, #ARGV[1]) == ARGV[1] and
  (tonumber(string.sub(cur, #ARGV[1] + 1)) or math.huge) <= tonumber(ARGV[3])
if cur ~= ARGV[1] and not ofSession then
  local session = ARGV[2] ~= 'session' and string.match(ARGV[1], '^(.*|)%d+$')
  if session and string.sub(cur, 1, #session) == session then
    return 2
  end
  return -1
end
redis.call('DEL', KEYS[1])
return 1
