-- cutover.lua: the moment from which a task record may hold its payloads only sealed in the
-- current format (a record created before it may also hold plain values and values sealed
-- the older way). Recorded once, by the first replica that starts with
-- store.encrypt_at_rest on, as its start plus the migration window; every later replica
-- reads it.
--
-- KEYS[1]  the cutover (string: Unix ms, store clock)
-- ARGV[1]  migration window, ms
-- returns  {cutover ms, now ms}   (a stored value that is not a number is replaced)
-- uses (from prelude.lua): now_ms

local now = now_ms()

local at = tonumber(redis.call('GET', KEYS[1]) or '')
if not at then
  at = now + tonumber(ARGV[1])
  redis.call('SET', KEYS[1], string.format('%.0f', at))
end
return {at, now}
