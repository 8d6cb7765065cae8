-- quota.lua: reserve a place for a new task within its creator's quotas, or say which quota
-- is full. Each quota is a sorted set of the caller's task ids scored by their expiry (ms,
-- Redis clock; unlimited tasks score +inf): members past their expiry are dropped first, so an
-- expired task never counts. A set is kept only for a quota that is configured.
--
-- Ended tasks are not removed by the transitions that end them: the caller of this script
-- drops them (after checking their records) when the running quota is full, and calls again.
--
-- The bytes quota counts, per task, the bytes it was created with plus what `charge.lua` adds
-- (its result): KEYS[3] is the set of counted tasks scored by expiry like the others, KEYS[4]
-- a hash of each counted task's bytes and, under the field '=', their sum; expired tasks are
-- taken out of the sum when found.
--
-- KEYS[1]  the caller's running set     KEYS[2]  the caller's retained set
-- KEYS[3]  the caller's bytes set       KEYS[4]  the caller's bytes hash (all in one slot)
-- ARGV[1]  task id
-- ARGV[2]  the task's lifetime, ms (-1 = unlimited)
-- ARGV[3]  most running tasks (0 = no quota)    ARGV[4]  most retained tasks (0 = no quota)
-- ARGV[5]  most bytes stored (0 = no quota)     ARGV[6]  bytes the task is created with
-- returns  {0, 0} reserved; {1, 0} the running quota is full; {2, ms until the oldest
--          retained task expires, or -1 if it never does} the retained quota is full;
--          {3, the same for the oldest counted task} the bytes quota would be exceeded
-- uses (from prelude.lua): now_ms

local now = now_ms()
local ttl = tonumber(ARGV[2])
local max_running = tonumber(ARGV[3])
local max_retained = tonumber(ARGV[4])
local max_bytes = tonumber(ARGV[5])
local bytes = tonumber(ARGV[6])

-- ms until the oldest member of a set expires, or -1 if it never does.
local function oldest(key)
  local score = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]
  if score == nil or score == 'inf' then
    return -1
  end
  return math.max(0, tonumber(score) - now)
end

-- A repeat (a retry after a lost reply) finds its reservation: it stands, counted once.
for i = 1, 3 do
  if redis.call('ZSCORE', KEYS[i], ARGV[1]) then
    return {0, 0}
  end
end

if max_running > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if redis.call('ZCARD', KEYS[1]) >= max_running then
    return {1, 0}
  end
end
if max_retained > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= max_retained then
    return {2, oldest(KEYS[2])}
  end
end
if max_bytes > 0 then
  local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
  for _, member in ipairs(expired) do
    local size = tonumber(redis.call('HGET', KEYS[4], member) or '0')
    redis.call('HINCRBY', KEYS[4], '=', -size)
    redis.call('HDEL', KEYS[4], member)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if tonumber(redis.call('HGET', KEYS[4], '=') or '0') + bytes > max_bytes then
    return {3, oldest(KEYS[3])}
  end
end

-- Reserve; a set lives as long as its longest-lived member (unlimited members: for ever).
local expiry = ttl < 0 and '+inf' or string.format('%.0f', now + ttl)
if max_bytes > 0 then
  redis.call('HSET', KEYS[4], ARGV[1], bytes)
  redis.call('HINCRBY', KEYS[4], '=', bytes)
end
for i, max in ipairs({max_running, max_retained, max_bytes, max_bytes}) do
  if max > 0 then
    if i < 4 then
      redis.call('ZADD', KEYS[i], expiry, ARGV[1])
    end
    if ttl < 0 then
      redis.call('PERSIST', KEYS[i])
    else
      local left = redis.call('PTTL', KEYS[i])
      -- -1: no expiry yet (a new key, holding only this task) or kept for an unlimited
      -- member; tell them apart (the hash also holds the sum).
      local new
      if i < 4 then
        new = redis.call('ZCARD', KEYS[i]) == 1
      else
        new = redis.call('HLEN', KEYS[i]) == 2
      end
      if (left == -1 and new) or (left >= 0 and left < ttl) then
        redis.call('PEXPIRE', KEYS[i], ttl)
      end
    end
  end
end
return {0, 0}
