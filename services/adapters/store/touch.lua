-- Mark a live run as looked at, unless it moved since the caller folded it: an
-- append since then scored the run afresh in the live index, and that score wins.
-- KEYS: run stream, shard live index (one hash tag); ARGV: seq the caller folded,
--       score (ms), run id. Returns 1 when scored, 0 when not (moved, or not live).
if redis.call('XLEN', KEYS[1]) ~= tonumber(ARGV[1]) then
  return 0
end
return redis.call('ZADD', KEYS[2], 'XX', 'CH', ARGV[2], ARGV[3])
