-- release: compare-and-DEL, so a release never deletes someone else's lease.
-- KEYS[1] route key; ARGV[1] our route value
-- Returns 1 deleted, 0 gone, -1 stolen.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
if cur ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
return 1
