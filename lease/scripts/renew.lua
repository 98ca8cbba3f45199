-- renew: compare-and-PEXPIRE, for a batch of leases. Never re-creates a
-- missing key: a lease that expired may already belong to someone else in
-- the holder's view of time.
-- KEYS[i] route key (on Cluster, all in one slot); ARGV[1] TTL ms;
-- ARGV[2] node|holder|, the start of every route value this Manager writes
-- Returns one status per key, in KEYS order: 1 renewed, 0 gone, -1 stolen
-- (someone else holds it).
-- The compare is of the holder, not of each lease's whole value: a
-- Manager holds at most one lease per room, so a key that starts with our
-- node|holder| is the lease we hold, or one we took again since the
-- batch was built (the old lease has ended then; extending the new one's
-- key is right, and only its own renewal marks it renewed). Sending one
-- prefix instead of a value per key was an eighth of the server's time per
-- renewed key, and 50 bytes a lease on the wire. Release stays
-- compare-the-value: deleting a newer lease's key would not be harmless.
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
local ours = ARGV[2]
local cur = redis.call('MGET', unpack(KEYS))
local res = {}
for i = 1, #KEYS do
  local v = cur[i]
  if not v then
    res[i] = 0
  elseif string.find(v, ours, 1, true) ~= 1 then
    -- plain find: no pattern, no substring made; a match anywhere but at
    -- the start is someone else's value
    res[i] = -1
  else
    redis.call('PEXPIREAT', KEYS[i], at)
    res[i] = 1
  end
end
return res
