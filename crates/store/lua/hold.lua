-- hold.lua: a running task asks for input without ending its run: under the current lease it
-- goes input_required with its outstanding requests (as park records them), but its worker
-- keeps the lease and the job, and waits; answer.lua then resumes it in place (no new job)
-- while the lease lives. For work that cannot move to another replica mid-way (an upstream's
-- request waiting on this replica's connection). One atomic step.
--
-- KEYS[1]  task record (hash)
-- ARGV[1]  fencing token         ARGV[2]  event channel     ARGV[3]  request keys, a JSON array
-- ARGV[4]  continuation: 'keep' (the state stays), 'none' (no state), or 'set' with the JSON in
--          ARGV[5] (a round's continuation, not a checkpoint: the task stops being resumable)
-- ARGV[6..] request key, method asked, request JSON, ...
-- returns  'held' | 'cancelled' | 'gone' | 'lost'  (a repeat of a hold that was applied: 'held'
--          while it waits, 'lost' once answered: the run then finds the answers in the record)
-- uses (from prelude.lua): now_ms, drop_if_expired

local now = now_ms()

local f = redis.call('HMGET', KEYS[1], 'status', 'token', 'created', 'ttl')
if not f[1] then
  return 'gone'
end
if drop_if_expired(KEYS[1], f[3], f[4], now) then
  return 'gone'
end
if f[1] == 'cancelled' then
  return 'cancelled'
end
if f[2] == ARGV[1] and f[1] == 'input_required' and redis.call('HGET', KEYS[1], 'reqkeys') == ARGV[3] then
  -- A repeat of this very hold (its first reply was lost, or too few replicas confirmed it):
  -- under this lease only this hold records these requests. Nothing more to write.
  return 'held'
end
if f[2] == ARGV[1] and f[1] == 'working' and redis.call('HGET', KEYS[1], 'reqkeys') == ARGV[3] then
  -- A repeat of this hold after the client answered it (answer.lua resumed the task in place
  -- under this lease): holding again would ask keys already answered (keys are unique over a
  -- task's life). 'lost', writing nothing: the run reads the answers recorded.
  return 'lost'
end
if f[2] ~= ARGV[1] or f[1] ~= 'working' then
  return 'lost'
end
if ARGV[4] == 'none' then
  redis.call('HDEL', KEYS[1], 'state', 'resumable')
elseif ARGV[4] == 'set' then
  redis.call('HSET', KEYS[1], 'state', ARGV[5])
  redis.call('HDEL', KEYS[1], 'resumable')
end
local pending = 0
for i = 6, #ARGV - 2, 3 do
  redis.call('HSET', KEYS[1], 'req:' .. ARGV[i], ARGV[i + 2], 'reqm:' .. ARGV[i], ARGV[i + 1])
  pending = pending + 1
end
redis.call('HSET', KEYS[1], 'status', 'input_required', 'pending', pending, 'updated', now, 'reqkeys', ARGV[3])
redis.call('PUBLISH', ARGV[2], 'input_required')
return 'held'
