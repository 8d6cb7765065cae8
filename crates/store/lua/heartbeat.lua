-- heartbeat.lua: the fleet's heartbeats, one record per live replica, kept in a hash beside a
-- sorted set of each record's expiry; every call first drops the lapsed ones (bounded), so no
-- path scans the keyspace.
--
-- KEYS[1]  the expiries (sorted set: replica id -> expiry, Unix ms by Redis's clock)
-- KEYS[2]  the records (hash: replica id -> "<written ms>|<heartbeat JSON>")
-- ARGV[1]  'beat' (record ARGV[3] as replica ARGV[2]'s), 'list' or 'leave' (remove ARGV[2]'s)
-- ARGV[2]  the replica id ('' for 'list')
-- ARGV[3]  the heartbeat, JSON ('beat' only)
-- ARGV[4]  how long a record lives unrefreshed, ms ('beat' only)
-- ARGV[5]  the most replicas recorded and listed
-- returns  'beat': 1 if recorded, 0 if the fleet is full; 'leave': 1;
--          'list': the live records, soonest to lapse first, at most ARGV[5] of them
-- Redis's clock decides what is live, so replicas' clocks need not agree.
-- uses (from prelude.lua): now_ms

local now = now_ms()
local mode, me, max = ARGV[1], ARGV[2], tonumber(ARGV[5])

-- Drop what lapsed (at most max per call; a call each few seconds keeps up).
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, max)
if #lapsed > 0 then
  redis.call('ZREM', KEYS[1], unpack(lapsed))
  redis.call('HDEL', KEYS[2], unpack(lapsed))
end

if mode == 'leave' then
  redis.call('ZREM', KEYS[1], me)
  redis.call('HDEL', KEYS[2], me)
  return 1
end

if mode == 'beat' then
  if not redis.call('ZSCORE', KEYS[1], me) and redis.call('ZCARD', KEYS[1]) >= max then
    return 0
  end
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), me)
  redis.call('HSET', KEYS[2], me, now .. '|' .. ARGV[3])
  return 1
end

local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'LIMIT', 0, max)
if #live == 0 then
  return {}
end
local records = redis.call('HMGET', KEYS[2], unpack(live))
local out = {}
for i = 1, #live do
  if records[i] then
    table.insert(out, records[i])
  end
end
return out
