-- KEYS: dead stream, queue stream (one hash tag); ARGV: entry id.
-- Moves the letter back to its queue in one step: 1 when moved, 0 when not there.
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #found == 0 then return 0 end
local fields = found[1][2]
for i = 1, #fields, 2 do
  if fields[i] == 'm' then redis.call('XADD', KEYS[2], '*', 'm', fields[i + 1]) end
end
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
