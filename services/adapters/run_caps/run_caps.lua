-- A tenant's line on a capped task queue, atomically (the rule: agentledger.events.run_caps).
-- KEYS[1]: set of the runs that count (live), KEYS[2]: list of the held runs, first come first.
-- ARGV: op, run id, most.
-- admit  -> 0 when the run is live, k when it is held k-th (asking again changes nothing)
-- finish -> the held runs that go live now, in order (the run removed from both: idempotent)
-- look   -> {live run ids, held run ids}
local live, held = KEYS[1], KEYS[2]
local op, run, most = ARGV[1], ARGV[2], tonumber(ARGV[3])

local function place_of(id)
  local ids = redis.call('LRANGE', held, 0, -1)
  for i, other in ipairs(ids) do
    if other == id then return i end
  end
  return nil
end

if op == 'admit' then
  if redis.call('SISMEMBER', live, run) == 1 then return 0 end
  local place = place_of(run)
  if place then return place end
  if redis.call('SCARD', live) < most and redis.call('LLEN', held) == 0 then
    redis.call('SADD', live, run)
    return 0
  end
  return redis.call('RPUSH', held, run)
elseif op == 'finish' then
  redis.call('SREM', live, run)
  redis.call('LREM', held, 0, run)
  local released = {}
  while redis.call('SCARD', live) < most do
    local next_run = redis.call('LPOP', held)
    if not next_run then break end
    redis.call('SADD', live, next_run)
    released[#released + 1] = next_run
  end
  return released
elseif op == 'look' then
  return {redis.call('SMEMBERS', live), redis.call('LRANGE', held, 0, -1)}
end
return redis.error_reply('unknown op ' .. tostring(op))
