-- Remove a finished run whole, once its archive is verified: the log, the snapshot,
-- the overflow pages, its entries in the shard's runs and live indexes, all or
-- nothing, and only while the log is still the one archived (its length and last
-- event id) and the run is not live.
-- KEYS: run stream, shard runs index, shard live index, run snapshot, run overflow
-- ARGV: run_id, count, last event id
local n = redis.call('XLEN', KEYS[1])
if n == 0 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 'gone'
end
if n ~= tonumber(ARGV[2]) then
  return 'changed'
end
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if last[1][2][2] ~= ARGV[3] then
  return 'changed'
end
if redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  return 'changed'
end
redis.call('UNLINK', KEYS[1], KEYS[4], KEYS[5])
redis.call('ZREM', KEYS[2], ARGV[1])
return 'removed'
