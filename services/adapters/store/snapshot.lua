-- Keep a run's snapshot unless one of the same version at a seq as high is kept.
-- KEYS: run snapshot
-- ARGV: version, seq, event id at seq, state, ttl_ms
local kept = redis.call('HMGET', KEYS[1], 'v', 'seq')
if kept[1] == ARGV[1] and tonumber(kept[2]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'seq', ARGV[2], 'id', ARGV[3], 'state', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
