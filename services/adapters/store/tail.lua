-- Read what a caller must fold to bring its state of a run up to date, checked
-- against the log in the same call: the events after the caller's seq while the
-- entry at that seq still holds the event the caller folded last; else after the
-- run's snapshot (when newer, of the caller's version, and still matching the
-- log); else the whole log (a stream deleted and made again, a snapshot of a
-- log that is gone).
-- KEYS: run stream, run snapshot (hash: v, seq, id, state)
-- ARGV: the caller's seq (0: none), the id of the event at that seq, snapshot version
-- Returns {base, snapshot state or false, stored snapshot seq, its event id, entries after base,
--          the snapshot's spec or false}
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
return {base, state, snap_seq, snap[3], redis.call('XRANGE', KEYS[1], '0-' .. (base + 1), '+'), spec}
