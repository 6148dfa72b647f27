-- Keep a run's snapshot header unless one of the same version at a seq as high is
-- kept; its spec and its full pages of past turns are written once each (HSETNX).
-- KEYS: run snapshot (hash: v, seq, id, state, spec, page:<n>)
-- ARGV: version, seq, event id at seq, state, ttl_ms, spec ('' for none), then (page n, blob)*
local kept = redis.call('HMGET', KEYS[1], 'v', 'seq')
if kept[1] ~= ARGV[1] or tonumber(kept[2]) < tonumber(ARGV[2]) then
  if kept[1] ~= ARGV[1] then
    redis.call('DEL', KEYS[1])  -- another format's pages are not ours
  end
  redis.call('HSET', KEYS[1], 'v', ARGV[1], 'seq', ARGV[2], 'id', ARGV[3], 'state', ARGV[4])
end
if ARGV[6] ~= '' then
  redis.call('HSETNX', KEYS[1], 'spec', ARGV[6])
end
for i = 7, #ARGV, 2 do
  redis.call('HSETNX', KEYS[1], 'page:' .. ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
