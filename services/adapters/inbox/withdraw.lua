-- XDEL an inbox entry unless the intake group has read it. KEYS: inbox; ARGV: group, entry id
local last = nil
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local f = {}
  for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
  if f['name'] == ARGV[1] then last = f['last-delivered-id'] end
end
local function parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
if last ~= nil then
  local lm, ls = parts(last)
  local em, es = parts(ARGV[2])
  if lm > em or (lm == em and ls >= es) then return 0 end
end
return redis.call('XDEL', KEYS[1], ARGV[2])
