-- prelude.lua: the functions the scripts share. Redis runs a script as one chunk and cannot
-- include another file, so the store puts this text before each script's own when it builds
-- the script (src/redis/scripts.rs): still one script, loaded once, one EVALSHA per call.
-- It only defines functions and calls nothing itself, so a script costs the commands it uses
-- and no more. It reads no KEYS or ARGV: a function that touches a key is handed it.
--
-- now_ms()                             Redis's clock, Unix ms (one TIME)
-- now_us()                             Redis's clock, Unix µs (one TIME)
-- drop_if_expired(key, created, ttl, now)
--                                      deletes the task record at `key` if its lifetime has
--                                      ended at `now` (ms): `created` and `ttl` are its fields
--                                      as HMGET returns them (ttl ms, negative = unlimited; a
--                                      record without a ttl is an error, as a corrupt one);
--                                      returns true if it deleted the record

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function drop_if_expired(key, created, ttl, now)
  ttl = tonumber(ttl)
  if ttl >= 0 and now >= tonumber(created) + ttl then
    redis.call('DEL', key)
    return true
  end
  return false
end

