-- charge.lua: change the bytes a task counts against its creator's stored-bytes quota (see
-- quota.lua): add what it came to hold after creation (its result), or take it out entirely
-- (its creation was given up). Nothing for a task that is not counted (created without a bytes
-- quota, or expired and dropped), so a late charge never counts a task twice or brings one back.
--
-- KEYS[1]  the caller's bytes set       KEYS[2]  the caller's bytes hash (one slot)
-- ARGV[1]  task id
-- ARGV[2]  bytes to add, or 'drop' to stop counting the task
-- returns  1 if the task was counted, 0 if not

if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
if ARGV[2] == 'drop' then
  local size = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
  redis.call('HINCRBY', KEYS[2], '=', -size)
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
redis.call('HINCRBY', KEYS[2], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], '=', ARGV[2])
return 1
