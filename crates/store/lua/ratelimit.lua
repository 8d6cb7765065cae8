-- ratelimit.lua: admit one request against several GCRA buckets of one scope (a principal), all
-- or nothing: the request is charged to every bucket only if no bucket refuses it, so a
-- request refused by one limit costs nothing from the others. Each bucket is one string key
-- holding its theoretical arrival time (TAT, Redis clock, µs), expiring once it is in the
-- past, so an idle scope leaves nothing behind.
--
-- A bucket admits `burst` requests at once and one more every `interval`. A soft bucket (its
-- hard tolerance above its tolerance) keeps admitting past its burst, up to the hard tolerance,
-- and says how long the caller should have waited (advice, not a refusal).
--
-- KEYS[i]      bucket i (every key of one call shares one hash tag: one Redis Cluster slot)
-- ARGV[3i-2]   bucket i's emission interval, µs (> 0)
-- ARGV[3i-1]   its tolerance, µs: interval × burst
-- ARGV[3i]     its hard tolerance, µs (= tolerance for a strict bucket)
-- returns      {0, 0} admitted; {0, advice µs} admitted past a soft bucket's burst (the
--              largest advice of all buckets); {i, retry after µs} refused by bucket i
--              (nothing charged)
-- uses (from prelude.lua): now_us

local now = now_us()
local tats = {}
local advice = 0
for i = 1, #KEYS do
  local interval = tonumber(ARGV[3 * i - 2])
  local tolerance = tonumber(ARGV[3 * i - 1])
  local hard = tonumber(ARGV[3 * i])
  local tat = tonumber(redis.call('GET', KEYS[i]) or '0') or 0
  if tat < now then
    tat = now
  end
  local next_tat = tat + interval
  local ahead = next_tat - now
  if ahead > hard then
    return {i, ahead - hard}
  end
  if ahead > tolerance and ahead - tolerance > advice then
    advice = ahead - tolerance
  end
  tats[i] = next_tat
end
for i = 1, #KEYS do
  -- The key lives until its TAT has passed (rounded up to a whole ms, at least 1).
  local ttl = math.floor((tats[i] - now) / 1000) + 1
  redis.call('SET', KEYS[i], string.format('%.0f', tats[i]), 'PX', ttl)
end
return {0, advice}
