-- release_session: compare-session-and-DEL, for the one case where the
-- fence is unknown: an acquire attempt took the room but its reply was
-- lost, and the acquisition then failed. The caller guarantees that it
-- holds no lease of this room (one acquisition per room at a time, none
-- registered), so any value with its node and epoch is a lease nobody
-- holds.
-- KEYS[1] route key; ARGV[1] node|epoch| (the start of the session's route values)
-- Returns 1 deleted, 0 gone, -1 someone else's.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
if string.sub(cur, 1, string.len(ARGV[1])) ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
return 1
