-- Append a batch of events to a run's stream and its shard's feed, atomically.
-- KEYS: run stream, shard feed, shard runs index, shard live index
-- ARGV: expected_seq, run_id, at_ms, live (1|0), feed_maxlen, then (event_id, type, blob)*
-- Entry ids are 0-<seq>, so XLEN is the run's seq and reads after a seq are O(log n).
local expected = tonumber(ARGV[1])
local run_id = ARGV[2]
local n = (#ARGV - 5) / 3
local current = redis.call('XLEN', KEYS[1])
if current ~= expected then
  if current > expected then
    -- a resend of an append that already landed (its reply was lost) is not a conflict
    local first = redis.call('XRANGE', KEYS[1], '0-' .. (expected + 1), '0-' .. (expected + 1))
    if #first == 1 and first[1][2][2] == ARGV[6] then
      return {'dup', expected + n}
    end
  end
  return {'conflict', current}
end
for i = 0, n - 1 do
  local seq = expected + i + 1
  local eid, etype, blob = ARGV[6 + 3 * i], ARGV[7 + 3 * i], ARGV[8 + 3 * i]
  redis.call('XADD', KEYS[1], '0-' .. seq, 'id', eid, 'type', etype, 'e', blob)
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'run', run_id, 'seq', seq, 'type', etype, 'id', eid)
end
if expected == 0 then
  redis.call('ZADD', KEYS[3], ARGV[3], run_id)
end
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[4], ARGV[3], run_id)
else
  redis.call('ZREM', KEYS[4], run_id)
end
return {'ok', expected + n}
