-- The sweeper's re-drives to one queue stream: each command is sent only when no
-- message for the same command still waits there for a worker to take it: queued
-- and not yet delivered to the group, or delayed for a retry. A step waiting for a
-- free worker is so counted once in the lag an autoscaler reads, however many
-- passes re-drive it. A message delivered and not yet acked (an acked entry is
-- deleted) does not count: its worker may be busy past it, holding it beyond its
-- free threads, or stuck, so one copy goes out for any free worker to take (the
-- handlers are idempotent), and that copy, queued, stops the next ones.
-- KEYS: stream, its delayed set (one hash tag)
-- ARGV: group, most (the entries scanned at most), then (command key, message)
--       pairs; a command's key is its actor and arguments joined by NUL
-- Returns how many were sent, or -1 (nothing sent) when more than `most` wait: a
-- backlog that large is work for the pool, and the run is looked at again later.
local group, most = ARGV[1], tonumber(ARGV[2])
if redis.call('XLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2]) > most then
  return -1
end
local delivered = {}
local ok, pending = pcall(redis.call, 'XPENDING', KEYS[1], group, '-', '+', most)
if ok then
  for _, p in ipairs(pending) do delivered[p[1]] = true end
end
local waiting = {}
local function note(m)
  local decoded, f = pcall(cjson.decode, m)
  if decoded and type(f) == 'table' and type(f.actor_name) == 'string' and type(f.args) == 'table' then
    local parts = {f.actor_name}
    for _, a in ipairs(f.args) do parts[#parts + 1] = tostring(a) end
    waiting[table.concat(parts, '\0')] = true
  end
end
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  if not delivered[entry[1]] then
    local fields = entry[2]
    for i = 1, #fields, 2 do
      if fields[i] == 'm' then note(fields[i + 1]) end
    end
  end
end
for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do note(m) end
local sent = 0
for i = 3, #ARGV, 2 do
  if not waiting[ARGV[i]] then
    redis.call('XADD', KEYS[1], '*', 'm', ARGV[i + 1])
    waiting[ARGV[i]] = true
    sent = sent + 1
  end
end
return sent
