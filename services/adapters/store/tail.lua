-- Read what a caller must fold to bring its state of a run up to date, checked
-- against the log in the same call: the events after the caller's seq while the
-- entry at that seq still holds the event the caller folded last; else after the
-- run's snapshot (when newer, of the caller's version, and still matching the
-- log); else the whole log (a stream deleted and made again, a snapshot of a
-- log that is gone).
-- KEYS: run stream, run snapshot (hash: v, seq, id, state)
-- ARGV: the caller's seq (0: none), the id of the event at that seq, snapshot version
-- Returns {base, snapshot state or false, stored snapshot seq, its event id, the entries after
--          base as a flat list (entry id, its 'e' field or false, ...), the snapshot's spec or false}
-- The entries go back flat, not as XRANGE gives them: a nested reply costs the script more to
-- hand back than the XRANGE costs.
local held, held_id, version = tonumber(ARGV[1]), ARGV[2], ARGV[3]

local function holds(seq, event_id)
  if seq < 1 then return false end
  local entry = redis.call('XRANGE', KEYS[1], '0-' .. seq, '0-' .. seq)[1]
  -- append.lua writes the fields in this order: id, type, e
  return entry ~= nil and entry[2][2] == event_id
end

local snap = redis.call('HMGET', KEYS[2], 'v', 'seq', 'id')
local snap_seq = 0
if snap[1] == version and snap[2] then snap_seq = tonumber(snap[2]) end
local snap_ok = nil  -- checked only when it is needed
local function snapshot_holds()
  if snap_ok == nil then snap_ok = snap_seq > 0 and holds(snap_seq, snap[3]) end
  return snap_ok
end

local base, from_snapshot = 0, false
if snap_seq > held and snapshot_holds() then
  base, from_snapshot = snap_seq, true
elseif holds(held, held_id) then
  base = held
elseif snapshot_holds() then
  base, from_snapshot = snap_seq, true
end
local state, spec = false, false
if from_snapshot then
  local got = redis.call('HMGET', KEYS[2], 'state', 'spec')
  state, spec = got[1], got[2]
end
local flat, n = {}, 0
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], '0-' .. (base + 1), '+')) do
  local fields, e = entry[2], false
  if #fields == 6 and fields[5] == 'e' then
    e = fields[6]  -- as append.lua writes them
  else
    for i = 1, #fields, 2 do if fields[i] == 'e' then e = fields[i + 1] end end
  end
  flat[n + 1], flat[n + 2], n = entry[1], e, n + 2
end
return {base, state, snap_seq, snap[3], flat, spec}
