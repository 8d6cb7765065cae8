-- pin_observe.lua: records what a pinned upstream lists now. With first-seen, seeds the
-- approved set with these definitions if nothing was ever approved for the upstream (of two
-- replicas racing, the first seeds and the second finds it seeded); then keeps, as the latest
-- seen, exactly the tools whose hash is not the approved one. Atomic, one slot.
--
-- KEYS[1]  approved       (hash: tool -> approved hash)
-- KEYS[2]  approved-defs  (hash: tool -> approved definition JSON)
-- KEYS[3]  seen           (hash: tool -> latest seen hash, withheld tools only)
-- KEYS[4]  seen-defs      (hash: tool -> latest seen definition JSON)
-- KEYS[5]  seeded         (string: set once anything was approved)
-- ARGV[1]  "1" to seed (pin = "first-seen"), "0" otherwise
-- ARGV[2]  most tools approved or kept as seen
-- ARGV[3..] triples: tool, hash, definition (already bounded by the caller)
-- returns  the approved hashes, HGETALL-style: {tool, hash, tool, hash, ...}

local max = tonumber(ARGV[2])
local count = (#ARGV - 2) / 3
if ARGV[1] == '1' and redis.call('EXISTS', KEYS[5]) == 0 and redis.call('HLEN', KEYS[1]) == 0 then
  for i = 0, math.min(count, max) - 1 do
    local at = 3 + i * 3
    redis.call('HSET', KEYS[1], ARGV[at], ARGV[at + 1])
    redis.call('HSET', KEYS[2], ARGV[at], ARGV[at + 2])
  end
  redis.call('SET', KEYS[5], '1')
end
redis.call('DEL', KEYS[3], KEYS[4])
local kept = 0
for i = 0, count - 1 do
  local at = 3 + i * 3
  if kept < max and redis.call('HGET', KEYS[1], ARGV[at]) ~= ARGV[at + 1] then
    redis.call('HSET', KEYS[3], ARGV[at], ARGV[at + 1])
    redis.call('HSET', KEYS[4], ARGV[at], ARGV[at + 2])
    kept = kept + 1
  end
end
return redis.call('HGETALL', KEYS[1])
