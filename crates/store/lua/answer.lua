-- answer.lua: record an owner's answers to a parked task's outstanding input requests.
-- Answers to keys that are not outstanding are ignored; an answered key stops being
-- outstanding (req:<key> removed) and joins the collected answers (ans:<key>, with the
-- method it answers in ask:<key>); once none remain the task is working again and a job is
-- enqueued, so any worker resumes it.
--
-- KEYS[1]  task record (hash)    KEYS[2]  job stream
-- ARGV[1]  owner key             ARGV[2]  event channel of the task
-- ARGV[3..] answer key, answer JSON, key, JSON, ...
-- returns  {'notfound'}              unknown, expired, or another owner's
--          {'idle', status}          not waiting for input: nothing recorded
--          {'invalid', key}          the answer to outstanding `key` does not fit its request
--                                    (e.g. a roots list for a form): nothing recorded
--          {'waiting', outstanding}  recorded; this many requests remain
--          {'resumed'}               recorded; the task is working and enqueued

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local f = redis.call('HMGET', KEYS[1], 'owner', 'status', 'created', 'ttl', 'id', 'pending')
if not f[1] or f[1] ~= ARGV[1] then
  return {'notfound'}
end
local ttl = tonumber(f[4])
if ttl >= 0 and now >= tonumber(f[3]) + ttl then
  redis.call('DEL', KEYS[1])
  return {'notfound'}
end
if f[2] ~= 'input_required' then
  return {'idle', f[2]}
end

-- The shape checks mirror the gateway's types closely (decoded only to look: what is
-- stored is the answer as received); an answer that still does not decode when the task
-- resumes fails the task with an error naming the key.
local SAMPLING_BLOCKS = {text = true, image = true, audio = true, tool_use = true, tool_result = true}

local function optional_string(v)
  return v == nil or v == cjson.null or type(v) == 'string'
end

local function sampling_block(b)
  return type(b) == 'table' and SAMPLING_BLOCKS[b['type']] == true
end

-- The method the request under a key asks, and whether `answer_json` is a result of it.
local function fits(request_json, answer_json)
  local ok_r, request = pcall(cjson.decode, request_json)
  local ok_a, answer = pcall(cjson.decode, answer_json)
  if not (ok_r and ok_a) or type(request) ~= 'table' or type(answer) ~= 'table' then
    return nil, false
  end
  local method = request['method']
  if method == 'elicitation/create' then
    local action, content = answer['action'], answer['content']
    return method, (action == 'accept' or action == 'decline' or action == 'cancel')
      and (content == nil or content == cjson.null or (type(content) == 'table' and content[1] == nil))
  elseif method == 'sampling/createMessage' then
    local content = answer['content']
    local blocks_ok = sampling_block(content)
    if not blocks_ok and type(content) == 'table' and content[1] ~= nil then
      blocks_ok = true
      for _, b in ipairs(content) do
        blocks_ok = blocks_ok and sampling_block(b)
      end
    end
    return method, (answer['role'] == 'user' or answer['role'] == 'assistant')
      and type(answer['model']) == 'string' and blocks_ok
  elseif method == 'roots/list' then
    local roots = answer['roots']
    if type(roots) ~= 'table' or (next(roots) ~= nil and roots[1] == nil) then
      return method, false
    end
    for _, root in ipairs(roots) do
      if type(root) ~= 'table' or type(root['uri']) ~= 'string' or not optional_string(root['name']) then
        return method, false
      end
    end
    return method, true
  end
  return method, false
end

local methods = {}
for i = 3, #ARGV - 1, 2 do
  local request = redis.call('HGET', KEYS[1], 'req:' .. ARGV[i])
  if request then
    local method, ok = fits(request, ARGV[i + 1])
    if not ok then
      return {'invalid', ARGV[i]}
    end
    methods[ARGV[i]] = method
  end
end

local pending = tonumber(f[6]) or 0
for i = 3, #ARGV - 1, 2 do
  local request = 'req:' .. ARGV[i]
  if redis.call('HEXISTS', KEYS[1], request) == 1 then
    redis.call('HDEL', KEYS[1], request)
    redis.call('HSET', KEYS[1], 'ans:' .. ARGV[i], ARGV[i + 1], 'ask:' .. ARGV[i], methods[ARGV[i]])
    pending = pending - 1
  end
end
if pending > 0 then
  redis.call('HSET', KEYS[1], 'pending', pending, 'updated', now)
  return {'waiting', pending}
end
redis.call('HSET', KEYS[1], 'status', 'working', 'pending', 0, 'updated', now,
  'msg', 'Input received; resuming')
redis.call('XADD', KEYS[2], '*', 'task', f[5])
redis.call('PUBLISH', ARGV[2], 'working')
return {'resumed'}
