-- keep_snapshot(key, args, i, last): keep a run's snapshot header unless one of the same
-- version at a seq as high is kept; its spec and its full pages of past turns are
-- written once each (HSETNX). Shared by snapshot.lua and append.lua (prepended to each).
-- key: run snapshot (hash: v, seq, id, state, spec, page:<n>)
-- args[i .. last]: version, seq, event id at seq, state, ttl_ms, spec ('' for none), then
--             (page n, blob)* up to args[last]
local function keep_snapshot(key, args, i, last)
  local kept = redis.call('HMGET', key, 'v', 'seq')
  if kept[1] ~= args[i] or tonumber(kept[2]) < tonumber(args[i + 1]) then
    if kept[1] ~= args[i] then
      redis.call('DEL', key)  -- another format's pages are not ours
    end
    redis.call('HSET', key, 'v', args[i], 'seq', args[i + 1], 'id', args[i + 2], 'state', args[i + 3])
  end
  if args[i + 5] ~= '' then
    redis.call('HSETNX', key, 'spec', args[i + 5])
  end
  for j = i + 6, last, 2 do
    redis.call('HSETNX', key, 'page:' .. args[j], args[j + 1])
  end
  redis.call('PEXPIRE', key, args[i + 4])
end
