-- session_end: end the node's session if it is still this epoch's: every
-- room whose route names the epoch is free at once.
-- KEYS[1] node key; ARGV[1] epoch
-- Returns 1 ended, 0 gone, -1 another epoch's.
local cur = redis.call('HGET', KEYS[1], 'epoch')
if not cur then
  return 0
end
if cur ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
return 1
