-- Remove published events from the head of a room's outbox, but only while
-- the head is still the event that was published: a concurrent worker (the
-- room's previous or next owner) may have removed some already, and a blind
-- LTRIM would then drop events nobody published.
-- KEYS: 1 outbox (list)
-- ARGV: the published events, oldest first, exactly as read
-- Returns how many were removed.
local n = 0
-- Events are unique and ordered, so skipping one that is no longer at the
-- head (someone else removed it) and popping the ones that are is safe.
for i = 1, #ARGV do
  if redis.call("LINDEX", KEYS[1], 0) == ARGV[i] then
    redis.call("LPOP", KEYS[1])
    n = n + 1
  end
end
return n
