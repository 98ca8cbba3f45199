-- renew: compare-and-PEXPIRE, for a batch of leases. Never re-creates a
-- missing key: a lease that expired may already belong to someone else in
-- the holder's view of time.
-- KEYS[i] route key (on Cluster, all in one slot); ARGV[1] TTL ms;
-- ARGV[i+1] our route value for KEYS[i]
-- Returns one status per key, in KEYS order: 1 renewed, 0 gone, -1 stolen
-- (someone else holds it).
-- The compare is of the whole value, fence included, although a value
-- that starts with our node|holder| is always our own: a key with our
-- holder and another fence (an acquire attempt whose reply was lost, run
-- by the server after its retry won; a failover that lost a takeover)
-- must end the lease, or it lives on under a fence the key no longer
-- carries and every fenced write of the room is refused. Comparing the
-- holder alone, sent once per call, was 13-25% cheaper per round and was
-- dropped for that; sending only each lease's fence saved nothing (the
-- cost is one argument per key, not its bytes).
-- One MGET instead of a GET per key: the cost of a batch is mostly the
-- redis.call overhead. unpack() takes up to 8000 values; the caller sends
-- at most 500 keys.
-- PEXPIREAT at one deadline computed here, not PEXPIRE per key: the
-- server rewrites every PEXPIRE into a PEXPIREAT (two new argument
-- objects per key) before running it, and that was a fifth of the
-- server's time per renewed key. From Redis 7 on, the clock stands still
-- inside a script, so this is the deadline PEXPIRE would have set; before
-- it, TIME runs first, so the deadline is earlier by at most the script's
-- run time, never later, and the key never outlives what the renewal's
-- send time promises the holder.
local t = redis.call('TIME')
local at = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1]))
local cur = redis.call('MGET', unpack(KEYS))
local res = {}
for i = 1, #KEYS do
  local v = cur[i]
  if not v then
    res[i] = 0
  elseif v ~= ARGV[i + 1] then
    res[i] = -1
  else
    redis.call('PEXPIREAT', KEYS[i], at)
    res[i] = 1
  end
end
return res
