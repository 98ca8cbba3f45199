-- acquire: take room:route:{ID} for a node's session, or report who has it.
-- KEYS[1] route key, KEYS[2] fence key (same hash tag, so one slot)
-- ARGV[1] node, ARGV[2] the node's session epoch, ARGV[3] the route value
-- the caller found naming a dead session ('' if none), ARGV[4] fence key
-- retention ms
-- Returns {1, fence} acquired, {2, fence} taken over from one of this
-- node's earlier epochs (dead since the node's one session names another:
-- nobody acts on the old fence, so the room is ours at once with a new
-- one), {0, value} held by someone else. A route of this node's epoch is
-- taken only as ARGV[3], the value the caller found and knows nobody holds
-- (an attempt whose reply was lost): a delayed attempt arriving after its
-- retry won must not re-fence the lease that retry handed out. One of a
-- later epoch is not this caller's (a delayed attempt of an ended
-- session): answered like anyone else's.
-- A route value is node|epoch|fence and has no TTL: it is held while that
-- node's session has that epoch (the caller reads it: another slot on
-- Cluster). One with a TTL was written by the earlier per-room lease
-- format, renewed by its holder: held until it expires or is released.
-- One MGET reads the route and the fence counter (one hash tag, so one
-- slot): every redis.call costs the server's single thread, on every
-- room's acquisition.
local code = 1
local both = redis.call('MGET', KEYS[1], KEYS[2])
local cur, counter = both[1], tonumber(both[2])
if cur then
  local node, epoch = string.match(cur, '^([^|]*)|([^|]*)|%d+$')
  epoch = tonumber(epoch)
  if node == ARGV[1] and epoch and epoch < tonumber(ARGV[2]) and redis.call('PTTL', KEYS[1]) == -1 then
    code = 2
  elseif cur ~= ARGV[3] or redis.call('PTTL', KEYS[1]) ~= -1 then
    -- Not ours, parseable or not, and not found dead: never overwritten.
    return {0, cur}
  end
end
-- A counter this script did not write (not a decimal integer, or at or
-- above 2^53, where a double cannot add one) is refused before anything is
-- written: a fence issued over it would not be above it.
if both[2] and (not string.match(both[2], '^%d+$') or counter >= 9007199254740992) then
  return redis.error_reply('fence counter ' .. KEYS[2] .. ' holds ' .. string.sub(both[2], 1, 40) ..
    ', not a fence this package wrote (a decimal integer below 2^53): delete the key to reseed it from the server clock')
end
-- The fence is the counter plus one, with a floor: the server clock in
-- microseconds, so a lost counter (failover, eviction, deletion) still
-- yields a larger fence than any issued before, as long as a room gets
-- fewer than one fence per microsecond. max(counter, floor) + 1 then one
-- SET with the retention is the INCR-with-floor in two calls instead of
-- four (GET, SET floor, INCR, PEXPIRE): acquire is on every room's path.
-- Lua numbers are doubles: exact below 2^53 (about 285 years of
-- microseconds since 1970); '%.0f' prints all digits.
-- A route taken over carries the last fence issued too: the fence rises
-- above it even if the counter was lost and the clock went back.
local t = redis.call('TIME')
local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
if counter and counter > fence then
  fence = counter
end
local last = cur and tonumber(string.match(cur, '|(%d+)$'))
if last and last > fence and last < 9007199254740992 then
  fence = last
end
fence = string.format('%.0f', fence + 1)
redis.call('SET', KEYS[2], fence, 'PX', ARGV[4])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2] .. '|' .. fence)
return {code, fence}
