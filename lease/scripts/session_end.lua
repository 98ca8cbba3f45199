-- session_end: end the node's session if this process started it, whatever
-- its epoch (a start whose reply was lost left one the process never
-- learnt): every room whose route names it is free at once.
-- KEYS[1] node key; ARGV[1] holder (random per process)
-- Returns 1 ended, 0 gone, -1 another process's.
local cur = redis.call('HGET', KEYS[1], 'holder')
if not cur then
  return 0
end
if cur ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
return 1
