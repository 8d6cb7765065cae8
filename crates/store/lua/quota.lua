-- quota.lua: reserve a place for a new task within its creator's quotas, or say which quota
-- is full. Each quota is a sorted set of the caller's task ids scored by their expiry (ms,
-- Redis clock; unlimited tasks score +inf): members past their expiry are dropped first, so an
-- expired task never counts. A set is kept only for a quota that is configured.
--
-- Ended tasks are not removed by the transitions that end them: the caller of this script
-- drops them (after checking their records) when the running quota is full, and calls again.
--
-- KEYS[1]  the caller's running set     KEYS[2]  the caller's retained set (one slot)
-- ARGV[1]  task id
-- ARGV[2]  the task's lifetime, ms (-1 = unlimited)
-- ARGV[3]  most running tasks (0 = no quota)    ARGV[4]  most retained tasks (0 = no quota)
-- returns  {0, 0} reserved; {1, 0} the running quota is full; {2, ms until the oldest
--          retained task expires, or -1 if it never does} the retained quota is full

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local max_running = tonumber(ARGV[3])
local max_retained = tonumber(ARGV[4])

if max_running > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if redis.call('ZCARD', KEYS[1]) >= max_running then
    return {1, 0}
  end
end
if max_retained > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= max_retained then
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]
    if oldest == 'inf' then
      return {2, -1}
    end
    return {2, math.max(0, tonumber(oldest) - now)}
  end
end

-- Reserve; a set lives as long as its longest-lived member (unlimited members: for ever).
local expiry = ttl < 0 and '+inf' or string.format('%.0f', now + ttl)
for i, max in ipairs({max_running, max_retained}) do
  if max > 0 then
    redis.call('ZADD', KEYS[i], expiry, ARGV[1])
    if ttl < 0 then
      redis.call('PERSIST', KEYS[i])
    else
      local left = redis.call('PTTL', KEYS[i])
      -- -1: no expiry yet (a new set) or kept for an unlimited member; tell them apart.
      if (left == -1 and redis.call('ZCARD', KEYS[i]) == 1) or (left >= 0 and left < ttl) then
        redis.call('PEXPIRE', KEYS[i], ttl)
      end
    end
  end
end
return {0, 0}
