-- The idempotency ledger of one operation key, atomically.
-- KEYS[1]: the key's hash {state, request, owner, started, result}
-- ARGV[1]: op (begin | finish | abandon), ARGV[2]: request hash, ARGV[3]: owner,
-- ARGV[4]: unused (times are Redis's own: TIME, so hosts' clocks never meet), ARGV[5]: result json (finish), ARGV[6]: seconds a done key is kept
local k, op = KEYS[1], ARGV[1]
local t = redis.call('TIME')
local now = string.format('%d.%06d', t[1], t[2])
if op == 'begin' then
  if redis.call('EXISTS', k) == 0 then
    redis.call('HSET', k, 'state', 'pending', 'request', ARGV[2], 'owner', ARGV[3], 'started', now)
    return {'run'}
  end
  local e = redis.call('HMGET', k, 'state', 'request', 'owner', 'started', 'result')
  if e[2] ~= ARGV[2] then return {'conflict', e[3]} end
  if e[1] == 'done' then return {'replay', e[3], e[5]} end
  return {'in_progress', e[3], e[4], now}  -- started and now, both Redis time
elseif op == 'finish' then
  local request = redis.call('HGET', k, 'request')
  if request and request ~= ARGV[2] then return {'conflict'} end
  redis.call('HSET', k, 'state', 'done', 'request', ARGV[2], 'owner', ARGV[3], 'result', ARGV[5])
  if tonumber(ARGV[6]) > 0 then redis.call('EXPIRE', k, ARGV[6]) end
  return {'done'}
elseif op == 'abandon' then
  if redis.call('HGET', k, 'state') == 'pending' then redis.call('DEL', k) end
  return {'abandoned'}
end
return redis.error_reply('unknown op ' .. tostring(op))
