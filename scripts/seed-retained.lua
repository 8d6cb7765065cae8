-- seed-retained.lua: the store-side helpers of scripts/bench-retained, one script, three modes.
--
-- Benchmark tooling, not on any request path: it runs against the standalone Redis that
-- mcpgate-cluster starts, between load runs, and touches keys it builds or SCANs itself rather
-- than keys declared in KEYS. That is fine on one redis-server and would be refused by a Redis
-- Cluster (declaring a million seeded keys per call is not practical).
--
-- ARGV[1] = 'seed'   clone a completed task ARGV[3] .. ARGV[3] + ARGV[4] - 1 times
--   ARGV[2] template task key (a hash, a copy of a task the gateway completed)
--   ARGV[3] first seed number         ARGV[4] how many in this call
--   ARGV[5] key prefix ('mcpgate')    ARGV[6] shards (seed n goes to shard n % shards)
--   ARGV[7] ttl ms of the clones      ARGV[8] marker, 8 base64url characters
--   ARGV[9] owner hash of the template's owner index ('' = index nothing)
--   Each clone is the template with a new id 't<ss>-<marker><n, 13 base64url digits>A' (a
--   well-formed task id), created = updated = now and ttl = ARGV[7]; the key expires then too.
--   It is indexed under the template's owner, as create.lua would (member '<created>:<id>').
--   returns the number of tasks written
--
-- ARGV[1] = 'reset'  one SCAN step deleting every task record, owner index and idempotency
--   key under the prefix (job streams, lease indexes and everything else stay)
--   ARGV[2] key prefix   ARGV[3] cursor   ARGV[4] SCAN COUNT
--   returns {next cursor, keys deleted}
--
-- ARGV[1] = 'check'  the members of index KEYS[1] (a zset or a set) whose task is gone
--   ARGV[2] how many such members to return as examples
--   A member names its task by its last ':'-separated part ('<created>:<id>' or '<id>'); the
--   task key is the index key's '<prefix>:{<tag>}' followed by ':task:<id>'.
--   returns {members, members naming no task id, members whose task key is gone, examples...}

local mode = ARGV[1]

local B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

-- n as 13 base64url digits, most significant first.
local function digits13(n)
  local out = {}
  for i = 13, 1, -1 do
    local d = n % 64
    out[i] = string.sub(B64, d + 1, d + 1)
    n = (n - d) / 64
  end
  return table.concat(out)
end

if mode == 'seed' then
  local template, first, count = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
  local prefix, shards, ttl = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
  local marker, owner = ARGV[8], ARGV[9]
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

  -- The template's fields but id, created, updated and ttl, which every clone sets.
  local all = redis.call('HGETALL', template)
  if #all == 0 then
    return redis.error_reply('template ' .. template .. ' is missing')
  end
  local fields = {'id', '', 'created', now, 'updated', now, 'ttl', ttl}
  for i = 1, #all, 2 do
    local f = all[i]
    if f ~= 'id' and f ~= 'created' and f ~= 'updated' and f ~= 'ttl' then
      fields[#fields + 1] = f
      fields[#fields + 1] = all[i + 1]
    end
  end

  local indexes = {}
  for n = first, first + count - 1 do
    local ss = string.format('%02x', n % shards)
    local id = 't' .. ss .. '-' .. marker .. digits13(n) .. 'A'
    local base = prefix .. ':{' .. prefix .. ':' .. ss .. '}'
    local key = base .. ':task:' .. id
    fields[2] = id
    redis.call('HSET', key, unpack(fields))
    redis.call('PEXPIRE', key, ttl)
    if owner ~= '' then
      local index = base .. ':owner:' .. owner
      redis.call('ZADD', index, 0, string.format('%013d:%s', now, id))
      indexes[index] = true
    end
  end
  -- An owner index lives as long as its longest-lived task.
  for index in pairs(indexes) do
    local left = redis.call('PTTL', index)
    if left >= -1 and left < ttl then
      redis.call('PEXPIRE', index, ttl)
    end
  end
  return count

elseif mode == 'reset' then
  local prefix = ARGV[2]
  local step = redis.call('SCAN', ARGV[3], 'MATCH', prefix .. ':{' .. prefix .. ':*', 'COUNT', ARGV[4])
  local deleted = 0
  for _, key in ipairs(step[2]) do
    if string.find(key, '}:task:', 1, true) or string.find(key, '}:owner:', 1, true)
      or string.find(key, '}:idem:', 1, true) then
      deleted = deleted + redis.call('DEL', key)
    end
  end
  return {step[1], deleted}

elseif mode == 'check' then
  local index, examples = KEYS[1], tonumber(ARGV[2])
  local kind = redis.call('TYPE', index)['ok']
  local members
  if kind == 'zset' then
    members = redis.call('ZRANGE', index, 0, -1)
  elseif kind == 'set' then
    members = redis.call('SMEMBERS', index)
  else
    return redis.error_reply(index .. ' is a ' .. kind .. ', not a zset or set')
  end
  local close = string.find(index, '}', 1, true)
  if not close then
    return redis.error_reply(index .. ' has no hash tag')
  end
  local base = string.sub(index, 1, close)
  local unparsed, gone, out = 0, 0, {}
  for _, member in ipairs(members) do
    local id = string.match(member, '([^:]+)$')
    if not id or not string.match(id, '^t%x%x%-') then
      unparsed = unparsed + 1
    elseif redis.call('EXISTS', base .. ':task:' .. id) == 0 then
      gone = gone + 1
      if #out < examples then
        out[#out + 1] = member
      end
    end
  end
  local reply = {#members, unparsed, gone}
  for _, m in ipairs(out) do
    reply[#reply + 1] = m
  end
  return reply
end

return redis.error_reply('unknown mode ' .. tostring(mode))
