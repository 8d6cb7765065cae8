-- forget.lua: forget queue consumers that hold no jobs. The check and the delete are one
-- atomic step: a job delivered to a consumer between a separate check and the delete would
-- vanish from the pending list, and no reclaim could find it again.
--
-- KEYS[1]  job stream
-- ARGV     names of the candidate consumers (found idle by XINFO CONSUMERS)
-- returns  how many were forgotten

local forgotten = 0
for _, name in ipairs(ARGV) do
  local pending = redis.call('XPENDING', KEYS[1], 'workers', '-', '+', 1, name)
  if #pending == 0 then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], 'workers', name)
    forgotten = forgotten + 1
  end
end
return forgotten
