-- purge.lua: delete a task that has ended, if the operator's filter selects it; never one
-- that is working or waiting for input (the check and the delete are one atomic step, so a
-- task cannot start or resume in between). Its owner-index entry is left to be dropped the
-- next time a listing meets it; its job, if any, finds no task and is acknowledged.
--
-- KEYS[1]  task record (hash)
-- ARGV[1]  statuses that may be deleted, as ",completed,failed,cancelled,"
-- ARGV[2]  delete only if its last change is at least this many ms old (0 = any age)
-- ARGV[3]  event channel of the task: 'purged' is published there on a delete, so every
--          replica drops the record from its cache of finished tasks (and waiters re-read)
-- returns  {'deleted', issuer, subject}  deleted (its creator, for the quotas it counted in)
--          {'live', status}              not ended: kept
--          {'skipped'}                   another status, or changed too recently: kept
--          {'notfound'}                  no such task (or it expired)
-- uses (from prelude.lua): now_ms, drop_if_expired

local now = now_ms()

local f = redis.call('HMGET', KEYS[1], 'status', 'updated', 'created', 'ttl', 'iss', 'sub')
if not f[1] then
  return {'notfound'}
end
-- A record without a numeric ttl (not one create.lua wrote) is not taken for expired.
if tonumber(f[4]) and drop_if_expired(KEYS[1], f[3], f[4], now) then
  return {'notfound'}
end
local status = f[1]
if status ~= 'completed' and status ~= 'failed' and status ~= 'cancelled' then
  return {'live', status}
end
if not string.find(ARGV[1], ',' .. status .. ',', 1, true) then
  return {'skipped'}
end
local older = tonumber(ARGV[2])
if older > 0 and now - tonumber(f[2]) < older then
  return {'skipped'}
end
redis.call('DEL', KEYS[1])
if ARGV[3] then
  redis.call('PUBLISH', ARGV[3], 'purged')
end
return {'deleted', f[5] or '', f[6] or ''}
