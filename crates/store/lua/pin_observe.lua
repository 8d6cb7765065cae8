-- pin_observe.lua: records what a pinned upstream lists now. With first-seen, seeds the
-- approved set with these definitions if nothing was ever approved for the upstream (of two
-- replicas racing, the first seeds and the second finds it seeded); then keeps, as the latest
-- seen, exactly the tools whose hash is not the approved one: first those that have an
-- approved hash (changed tools), then new ones, so new tools past the bound can never push a
-- changed tool out of what an operator is shown. Atomic, one slot.
--
-- A tool with an empty hash is not approvable (its definition was over the caller's bound and
-- is a stub): it is never seeded, and kept as seen like any other withheld tool.
--
-- KEYS[1]  approved       (hash: tool -> approved hash)
-- KEYS[2]  approved-defs  (hash: tool -> approved definition JSON)
-- KEYS[3]  seen           (hash: tool -> latest seen hash, withheld tools only)
-- KEYS[4]  seen-defs      (hash: tool -> latest seen definition JSON)
-- KEYS[5]  seeded         (string: set once anything was approved)
-- ARGV[1]  "1" to seed (pin = "first-seen"), "0" otherwise
-- ARGV[2]  most tools approved or kept as seen
-- ARGV[3..] triples: tool, hash, definition (already bounded by the caller)
-- returns  {1 if this call seeded else 0, tool, hash, tool, hash, ...} (the approved hashes)

local max = tonumber(ARGV[2])
local count = (#ARGV - 2) / 3
local seeded = 0
if ARGV[1] == '1' and redis.call('EXISTS', KEYS[5]) == 0 and redis.call('HLEN', KEYS[1]) == 0 then
  local taken = 0
  for i = 0, count - 1 do
    local at = 3 + i * 3
    if taken < max and ARGV[at + 1] ~= '' then
      redis.call('HSET', KEYS[1], ARGV[at], ARGV[at + 1])
      redis.call('HSET', KEYS[2], ARGV[at], ARGV[at + 2])
      taken = taken + 1
    end
  end
  redis.call('SET', KEYS[5], '1')
  seeded = 1
end
redis.call('DEL', KEYS[3], KEYS[4])
local kept = 0
-- Pass 1: tools that have an approved hash (changed); pass 2: new tools.
for pass = 1, 2 do
  for i = 0, count - 1 do
    local at = 3 + i * 3
    local approved = redis.call('HGET', KEYS[1], ARGV[at])
    if kept < max and approved ~= ARGV[at + 1] and ((pass == 1) == (approved ~= false)) then
      redis.call('HSET', KEYS[3], ARGV[at], ARGV[at + 1])
      redis.call('HSET', KEYS[4], ARGV[at], ARGV[at + 2])
      kept = kept + 1
    end
  end
end
local out = redis.call('HGETALL', KEYS[1])
table.insert(out, 1, seeded)
return out
