-- create.lua: create a task in `working`, index it under its owner (when asked), either
-- enqueue its job or record the lease of the worker that runs it at once (run where
-- created), and remember the call for idempotent retries: one atomic step.
--
-- KEYS[1]  task record (hash)              <p>:{<shard>}:task:<id>
-- KEYS[2]  owner index of the shard (zset)  <p>:{<shard>}:owner:<owner hash>
-- KEYS[3]  job stream of the shard          <p>:{<shard>}:jobs; with ARGV[18], the shard's
--          lease index instead (zset)       <p>:{<shard>}:leases
-- KEYS[4]  idempotency key (string)         <p>:{<shard>}:idem:<scope digest>; absent when
--          the call asked for no deduplication (then ARGV[11] and ARGV[15] are unused)
-- ARGV[1]  task id            ARGV[2]  owner key        ARGV[3]  issuer     ARGV[4] subject
-- ARGV[5]  era                ARGV[6]  tool             ARGV[7]  arguments  ARGV[8] capabilities
-- ARGV[9]  ttl ms (-1 = unlimited)      ARGV[10] poll interval ms
-- ARGV[11] idempotency window ms        ARGV[12] "1" to ignore an existing idempotency key
-- ARGV[13] index horizon ms: owner index entries older than this are dropped (0 = keep all;
--          -1 = do not index this task: tasks/list is not served)
-- ARGV[14] continuation state JSON for the first run ('' = none)
-- ARGV[15] digest of the call (tool and arguments), hex: what the idempotency key must match
-- ARGV[16] the creator's scopes, space-separated
-- ARGV[17] bytes of the answers below (the task's answer budget starts there)
-- ARGV[18] worker that runs the task from now on ('' = none: a worker claims its job from the
--          queue); it holds the first lease (attempt 1, fencing token 1), recorded in the
--          lease index (member: task id, score: lease deadline) where any replica finds it
--          once it lapses
-- ARGV[19] lease ms of that worker
-- ARGV[20] the caller's credential, sealed ('' = none)
-- ARGV[21] traceparent of the creating request ('' = none)
-- ARGV[22] virtual server the task was created through ('' = the root endpoint)
-- ARGV[23..] answer key, method answered, answer JSON, ... gathered before creation
--           (stored as ans:<key> and ask:<key>)
-- returns  {1, created_ms, job entry}  the task was created (also when this very script
--                              already ran: a retry after a lost reply must not reset the record);
--                              the entry is '' when the task runs where it was created
--          {0, existing_id}    the same call created that task within the window
--          {2, existing_id}    the idempotency key was used for another call: nothing created
-- The idempotency key holds "<task id> <call digest>".
-- uses (from prelude.lua): now_ms

local now = now_ms()

local created = redis.call('HGET', KEYS[1], 'created')
if created then
  -- Only a task created running is returned with its job here (its entry is '').
  return {1, tonumber(created), ''}
end

if KEYS[4] and ARGV[12] ~= '1' then
  local existing = redis.call('GET', KEYS[4])
  if existing then
    local space = string.find(existing, ' ', 1, true)
    if not space then
      return {0, existing}
    end
    local id = string.sub(existing, 1, space - 1)
    if string.sub(existing, space + 1) ~= ARGV[15] then
      return {2, id}
    end
    return {0, id}
  end
end

local ttl = tonumber(ARGV[9])
local running = ARGV[18] ~= ''
local attempts, token, lease_until = 0, 0, 0
if running then
  attempts, token, lease_until = 1, 1, now + tonumber(ARGV[19])
end
redis.call('HSET', KEYS[1],
  'id', ARGV[1], 'owner', ARGV[2], 'iss', ARGV[3], 'sub', ARGV[4], 'era', ARGV[5],
  'tool', ARGV[6], 'args', ARGV[7], 'caps', ARGV[8], 'status', 'working',
  'created', now, 'updated', now, 'ttl', ttl, 'poll', ARGV[10],
  'attempts', attempts, 'token', token, 'lease_until', lease_until, 'worker', ARGV[18],
  'scopes', ARGV[16], 'ans_bytes', ARGV[17])
if ARGV[14] ~= '' then
  redis.call('HSET', KEYS[1], 'state', ARGV[14])
end
if ARGV[20] ~= '' then
  redis.call('HSET', KEYS[1], 'cred', ARGV[20])
end
if ARGV[21] ~= '' then
  redis.call('HSET', KEYS[1], 'trace', ARGV[21])
end
if ARGV[22] ~= '' then
  redis.call('HSET', KEYS[1], 'srv', ARGV[22])
end
for i = 23, #ARGV - 2, 3 do
  redis.call('HSET', KEYS[1], 'ans:' .. ARGV[i], ARGV[i + 2], 'ask:' .. ARGV[i], ARGV[i + 1])
end
if ttl >= 0 then
  redis.call('PEXPIREAT', KEYS[1], now + ttl)
end

-- The owner index lives as long as its longest-lived task; entries older than any task can
-- live are dropped as new ones arrive, so an active owner's index stays bounded.
local horizon = tonumber(ARGV[13])
if horizon >= 0 then
  if horizon > 0 and now > horizon then
    redis.call('ZREMRANGEBYLEX', KEYS[2], '-', string.format('(%013d', now - horizon))
  end
  local left = redis.call('PTTL', KEYS[2])
  redis.call('ZADD', KEYS[2], 0, string.format('%013d:%s', now, ARGV[1]))
  if ttl < 0 then
    redis.call('PERSIST', KEYS[2])
  elseif left < ttl and left ~= -1 then
    -- -2: the index is new; -1 (no expiry) stays: an unlimited task lives in it.
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end

local entry = ''
if running then
  -- Should the worker stop renewing, the lease lapses and any replica's sweep of the lease
  -- index enqueues the task (lapse.lua).
  redis.call('ZADD', KEYS[3], lease_until, ARGV[1])
else
  entry = redis.call('XADD', KEYS[3], '*', 'task', ARGV[1])
end

-- A retry is only recognised while the task surely exists.
if KEYS[4] then
  local window = tonumber(ARGV[11])
  if ttl >= 0 and ttl < window then
    window = ttl
  end
  if window > 0 then
    redis.call('SET', KEYS[4], ARGV[1] .. ' ' .. ARGV[15], 'PX', window)
  end
end
return {1, now, entry}
