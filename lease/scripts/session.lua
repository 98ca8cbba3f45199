-- session: start a node's session, room:node:{NODE}, a hash with a new
-- epoch, the node's state and its forwarding address, expiring after TTL.
-- KEYS[1] node key; ARGV[1] the epoch this process last had ('0' if none),
-- ARGV[2] holder (random per process), ARGV[3] state, ARGV[4] addr,
-- ARGV[5] TTL ms, ARGV[6] this start's attempt number (rising per process)
-- Returns {1, epoch} started, or {0, PTTL ms} while another process's
-- session (or a heartbeat of the earlier per-room lease format) is alive:
-- it is never replaced, as rooms hang off it. This process's own (same
-- holder) is replaced by a later attempt only: its last epoch, whose
-- leases the caller has ended, or one whose start's reply was lost. The
-- same attempt again (the client's resend after a lost reply) gets the
-- epoch it started. An earlier attempt arriving late (a request held up in
-- the network after its caller gave up) is refused: the epoch stored since
-- may have leases, and nobody waits for this answer.
-- The epoch is never reused: it is above the server clock in microseconds,
-- the stored epoch and the caller's last one, so neither an expired key
-- nor a lost one (failover) brings an old epoch back. A session whose
-- epoch has ended is dead for good, which is what lets another node take
-- its rooms after reading it once (docs/leases.md).
local cur = redis.call('HMGET', KEYS[1], 'epoch', 'holder', 'attempt')
if redis.call('EXISTS', KEYS[1]) == 1 then
  local attempt = cur[2] == ARGV[2] and tonumber(cur[3]) or 0
  if attempt == tonumber(ARGV[6]) then
    return {1, cur[1]}
  elseif cur[2] ~= ARGV[2] or attempt > tonumber(ARGV[6]) then
    return {0, redis.call('PTTL', KEYS[1])}
  end
end
cur = cur[1]
local t = redis.call('TIME')
local epoch = tonumber(t[1]) * 1000000 + tonumber(t[2])
local stored, last = tonumber(cur), tonumber(ARGV[1])
if stored and stored > epoch then
  epoch = stored
end
if last and last > epoch then
  epoch = last
end
epoch = string.format('%.0f', epoch + 1)
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'epoch', epoch, 'holder', ARGV[2], 'attempt', ARGV[6], 'state', ARGV[3], 'addr', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {1, epoch}
