-- answer.lua: record an owner's answers to a parked task's outstanding input requests.
-- Answers to keys that are not outstanding are ignored; an answered key stops being
-- outstanding (req:<key>, reqm:<key> removed) and joins the collected answers (ans:<key>, with
-- the method it answers in ask:<key>); once none remain the task is working again and a job is
-- enqueued, so any worker resumes it (unless a live run holds the task, asking in place: see
-- hold.lua; it is woken by the event instead). The gateway decoded and size-checked every answer: this
-- script never decodes one, so its cost does not grow with their size.
--
-- KEYS[1]  task record (hash)    KEYS[2]  job stream    KEYS[3]  lease index (zset)
-- ARGV[1]  owner key             ARGV[2]  event channel of the task
-- ARGV[3]  most bytes of answers a task may hold (over all rounds)
-- ARGV[4..] answer key, methods the answer is a valid result of (",m1,m2,"), answer as stored
--          (sealed when payloads are encrypted at rest), the answer's own size in bytes, ...
-- returns  {'notfound'}              unknown, expired, or another owner's
--          {'idle', status}          not waiting for input: nothing recorded
--          {'invalid', key}          the answer to outstanding `key` is no result of the method
--                                    its request asks (e.g. a roots list for a form): nothing
--                                    recorded
--          {'toolarge', limit}       the answers would exceed the task's budget: nothing recorded
--          {'waiting', outstanding}  recorded; this many requests remain
--          {'resumed'}               recorded; the task is working and enqueued
-- uses (from prelude.lua): now_ms, drop_if_expired

local now = now_ms()

local f = redis.call('HMGET', KEYS[1], 'owner', 'status', 'created', 'ttl', 'id', 'pending', 'ans_bytes',
  'lease_until')
if not f[1] or f[1] ~= ARGV[1] then
  return {'notfound'}
end
if drop_if_expired(KEYS[1], f[3], f[4], now) then
  return {'notfound'}
end
if f[2] ~= 'input_required' then
  return {'idle', f[2]}
end

-- First check everything (nothing is recorded unless all of it fits), then record.
local methods = {}
local bytes = tonumber(f[7]) or 0
for i = 4, #ARGV - 3, 4 do
  local key = ARGV[i]
  if redis.call('HEXISTS', KEYS[1], 'req:' .. key) == 1 then
    local method = redis.call('HGET', KEYS[1], 'reqm:' .. key)
    if not method then
      -- Parked before requests carried their method: the answer's own kind decides.
      method = string.match(ARGV[i + 1], '^,([^,]+),')
    end
    if not method or not string.find(ARGV[i + 1], ',' .. method .. ',', 1, true) then
      return {'invalid', key}
    end
    methods[key] = method
    bytes = bytes + tonumber(ARGV[i + 3])
  end
end
if bytes > tonumber(ARGV[3]) then
  return {'toolarge', ARGV[3]}
end

local pending = tonumber(f[6]) or 0
for i = 4, #ARGV - 3, 4 do
  local key = ARGV[i]
  if methods[key] then
    redis.call('HDEL', KEYS[1], 'req:' .. key, 'reqm:' .. key)
    redis.call('HSET', KEYS[1], 'ans:' .. key, ARGV[i + 2], 'ask:' .. key, methods[key])
    methods[key] = nil
    pending = pending - 1
  end
end
redis.call('HSET', KEYS[1], 'ans_bytes', bytes)
if pending > 0 then
  redis.call('HSET', KEYS[1], 'pending', pending, 'updated', now)
  return {'waiting', pending}
end
redis.call('HSET', KEYS[1], 'status', 'working', 'pending', 0, 'updated', now,
  'msg', 'Input received; resuming')
if (tonumber(f[8]) or 0) <= now then
  -- No live run: the queue resumes it (a lapsed lease's entry goes, so no sweep enqueues it twice).
  redis.call('ZREM', KEYS[3], f[5])
  redis.call('XADD', KEYS[2], '*', 'task', f[5])
end
redis.call('PUBLISH', ARGV[2], 'working')
return {'resumed'}
