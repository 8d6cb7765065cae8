-- seal_ring.lua: the fleet's seal key rings, as each live replica recorded its own (ids and
-- fingerprints, never keys), checked against this replica's ring and then recorded.
--
-- KEYS[1]  the rings (hash: replica id -> "<seen ms>|<sealing key id>|<id>=<fingerprint>,...")
-- ARGV[1]  this replica's id
-- ARGV[2]  how long a record lives without being refreshed, ms (older ones are dropped)
-- ARGV[3]  'check' (start-up: record only without a 'other_key' or 'missing' conflict),
--          'refresh' (a running replica: record whatever is found) or 'forget' (stopping:
--          remove this replica's record)
-- ARGV[4]  this ring: "<sealing key id>|<id>=<fingerprint>,..."
-- returns  the conflicts with the other live replicas' rings, a flat list of kind, key id:
--          'other_key'  a live replica holds this key id with another key
--          'missing'    a live replica seals with this key id, which this ring lacks
--          'unknown'    this ring seals with this key id, which no other live replica holds
--                       (only when there is one)
-- Redis's clock decides what is live, so replicas' clocks need not agree.
-- uses (from prelude.lua): now_ms

local now = now_ms()
local me, live, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3]

if mode == 'forget' then
  redis.call('HDEL', KEYS[1], me)
  return {}
end

local function parse(ring)
  local sealing, list = string.match(ring, '^([^|]*)|(.*)$')
  local keys = {}
  if list then
    for id, fingerprint in string.gmatch(list, '([^,=]+)=([^,]+)') do
      keys[id] = fingerprint
    end
  end
  return sealing, keys
end

local sealing, mine = parse(ARGV[4])
local out, said = {}, {}
local function conflict(kind, id)
  if not said[kind .. ' ' .. id] then
    said[kind .. ' ' .. id] = true
    table.insert(out, kind)
    table.insert(out, id)
  end
end

local others, known, refused = false, false, false
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local id, value = all[i], all[i + 1]
  local seen, ring = string.match(value, '^(%d+)|(.*)$')
  if id ~= me then
    if not seen or now - tonumber(seen) > live then
      -- Not refreshed for a lifetime: that replica stopped (or the record is not ours).
      redis.call('HDEL', KEYS[1], id)
    else
      others = true
      local their_sealing, theirs = parse(ring)
      for key_id, fingerprint in pairs(theirs) do
        if mine[key_id] and mine[key_id] ~= fingerprint then
          conflict('other_key', key_id)
          refused = true
        end
      end
      if their_sealing and their_sealing ~= '' and not mine[their_sealing] then
        conflict('missing', their_sealing)
        refused = true
      end
      if theirs[sealing] and theirs[sealing] == mine[sealing] then
        known = true
      end
    end
  end
end
if others and not known then
  conflict('unknown', sealing)
end
if mode == 'refresh' or not refused then
  redis.call('HSET', KEYS[1], me, now .. '|' .. ARGV[4])
end
return out
