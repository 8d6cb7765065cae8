-- handback.lua: put a job this worker read but will not claim (no free slot) back on the
-- queue: acknowledged and replaced by a fresh entry any worker reads next. Atomic, so the job
-- is never lost between the two. A job no longer pending (already taken over) is left alone.
--
-- KEYS[1]  job stream
-- ARGV[1]  job entry id          ARGV[2]  task id
-- returns  1 if handed back, 0 if it was no longer pending

if redis.call('XACK', KEYS[1], 'workers', ARGV[1]) == 0 then
  return 0
end
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('XADD', KEYS[1], '*', 'task', ARGV[2])
return 1
