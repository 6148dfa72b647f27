-- Append a batch of events to a run's stream, one entry to its shard's feed, the
-- shard's indexes, the overflow pages of events whose tool-made field passed the
-- cap, the commands the batch made due to their task-queue streams, and the
-- snapshot of the state the batch leads to when the writer made one
-- (keep_snapshot.lua, prepended): all or nothing, at the expected seq. The writer
-- dispatches.
-- KEYS: run stream, shard feed, shard runs index, shard live index, run snapshot,
--       run overflow (hash: '<event id>:<n>' -> page), then one task-queue stream per
--       command (all in the run's shard: one hash tag)
-- ARGV: expected_seq, run_id, at_ms, live (1|0), feed_maxlen, n events, the id of the
--       event at expected_seq ('' for none: then the length alone is checked),
--       then (event_id, type, blob) per event, then k and k snapshot args (as
--       snapshot.lua's ARGV; k = 0: none), then p and p (field, page) pairs' 2p
--       args, then one encoded message per command
-- Entry ids are 0-<seq>, so XLEN is the run's seq and reads after a seq are O(log n).
local expected = tonumber(ARGV[1])
local run_id = ARGV[2]
local n = tonumber(ARGV[6])
local after_id = ARGV[7]
local current = redis.call('XLEN', KEYS[1])
if current ~= expected then
  if current > expected then
    -- a resend of an append that already landed (its reply was lost) is not a conflict;
    -- its commands were queued with it
    local first = redis.call('XRANGE', KEYS[1], '0-' .. (expected + 1), '0-' .. (expected + 1))
    if #first == 1 and first[1][2][2] == ARGV[8] then
      return {'dup', expected + n}
    end
  end
  return {'conflict', current}
end
-- the log must end with the event the writer folded last, not only be as long:
-- a state folded from an append that lost its race has the length of another log
if expected > 0 and after_id ~= '' then
  local last = redis.call('XRANGE', KEYS[1], '0-' .. expected, '0-' .. expected)
  if #last ~= 1 or last[1][2][2] ~= after_id then
    return {'conflict', current}
  end
end
local last_type, last_id = '', ''
for i = 0, n - 1 do
  local seq = expected + i + 1
  local eid, etype, blob = ARGV[8 + 3 * i], ARGV[9 + 3 * i], ARGV[10 + 3 * i]
  redis.call('XADD', KEYS[1], '0-' .. seq, 'id', eid, 'type', etype, 'e', blob)
  last_type, last_id = etype, eid
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'run', run_id,
  'first', expected + 1, 'seq', expected + n, 'type', last_type, 'id', last_id, 'at', ARGV[3])
if expected == 0 then
  redis.call('ZADD', KEYS[3], ARGV[3], run_id)
end
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[4], ARGV[3], run_id)
else
  redis.call('ZREM', KEYS[4], run_id)
end
local base = 8 + 3 * n
local k = tonumber(ARGV[base])
if k > 0 then
  keep_snapshot(KEYS[5], ARGV, base + 1, base + k)
end
base = base + 1 + k
local p = tonumber(ARGV[base])
for j = 1, p do
  redis.call('HSET', KEYS[6], ARGV[base + 2 * j - 1], ARGV[base + 2 * j])
end
base = base + 1 + 2 * p
for j = 7, #KEYS do
  redis.call('XADD', KEYS[j], '*', 'm', ARGV[base + j - 7])
end
return {'ok', expected + n}
