-- node_forget: drop node ids from the index of sessions, room:node:index,
-- if each still names the epoch the caller read and found ended. A node
-- that started a session since has written its new epoch there (after the
-- session itself), and stays.
-- KEYS[1] the index; ARGV pairs: node id, epoch read
-- Returns how many were dropped.
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    n = n + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return n
