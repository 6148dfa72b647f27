-- The lock table, atomically: the same rule as events/locks.py (a test compares them).
-- KEYS: req (hash id -> json request), order (zset id -> arrival), holders (hash key ->
--       json {id: mode}), tokens (hash key -> last token), leases (zset id -> lease_until_us),
--       seq (arrival counter), closed (hash slot key -> closed until, us), served (hash
--       't:<tenant>' / 'r:<run>' -> the grant count at its last grant, '#' -> grants made),
--       waits (hash id -> json {k: keys, l: limits, t: tenant, u: run} of each waiting
--       request: what its turn and its grant depend on, without its message; a waiter
--       of a table written before it existed is read from req)
-- ARGV[1]: op (enqueue | release | renew | expire | close | look), ARGV[2]: now in microseconds, or ''
--          for Redis's own clock, ARGV[3]: payload, ARGV[4] (enqueue): '1' to report what
--          requests asked again already hold
-- A request is {keys, lease_s, run, call, notify, final, carried, whole, limits, tenant}: who
-- asked (waiters are served round-robin by tenant, then by run: events/locks.py), the
-- message to send them when they are granted later (by a release or an expiry, not by
-- their own ask); in a partitioned table, the part of the request in this partition
-- (keys), whether it is its last (final), the tokens of the earlier parts (carried) and
-- every key (whole), the max of each of its slot keys (mode 'n': limits). A part that is
-- not final is held without a lease: its score in leases is +inf, so no expiry takes it
-- (events/lock_partitions.py says why). A slot key's token goes with its last holder.
-- Returns json {grants: [{id, tokens, lease_until_us, final, keys, whole, lease_s, run,
--               call, notify, limits}], expired: [{id, run, call, whole}], renewed: bool}
--         (expire also lists every partial hold among the grants: to be sent on again, and
--         reopens the slot keys whose closure lapsed); close: {key: seconds} closes slot
--         keys from now (a later end wins); look: [key] -> {keys: {key: [holders, closed
--         until us or 0]}}; usage: {keys: {key: [holders, waiters, closed until us or 0]}}
--         of every slot key in use, waited for or closed
local REQ, ORDER, HOLDERS, TOKENS, LEASES, SEQ = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local CLOSED, SERVED, WAITS = KEYS[7], KEYS[8], KEYS[9]
local op, now = ARGV[1], tonumber(ARGV[2])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function who(name)
  if type(name) == 'string' then return name end
  return ''
end

local function conflicts(a, b) return a == 'w' or b == 'w' or ((a == 'n') ~= (b == 'n')) end
local function fmt(n) return string.format('%.0f', n) end

local seen_holders = {}  -- key -> its holders, read once a call (every write goes through here)

local function holders_of(key)
  local hs = seen_holders[key]
  if hs then return hs end
  local raw = redis.call('HGET', HOLDERS, key)
  if raw then hs = cjson.decode(raw) else hs = {} end
  seen_holders[key] = hs
  return hs
end

local function set_holders(key, hs)
  seen_holders[key] = hs
  if next(hs) == nil then redis.call('HDEL', HOLDERS, key)
  else redis.call('HSET', HOLDERS, key, cjson.encode(hs)) end
end

local function max_of(r, key)
  if type(r.limits) == 'table' and r.limits[key] then return tonumber(r.limits[key]) end
  return 1
end

local seen_closed = {}  -- slot key -> closed until (us), read once a call
local function shut_until(key)
  local until_us = seen_closed[key]
  if until_us == nil then
    until_us = tonumber(redis.call('HGET', CLOSED, key) or '0')
    seen_closed[key] = until_us
  end
  return until_us
end

-- whether the holders (or a closure) alone keep `r` waiting, whoever waits before it: a
-- pass can grant only a request this is false for (the same test as `free` with no waiter)
local function stuck(r)
  for key, mode in pairs(r.keys) do
    if mode == 'n' and shut_until(key) > now then return true end
    local count = 0
    for _, m in pairs(holders_of(key)) do
      if conflicts(mode, m) then return true end
      count = count + 1
    end
    if mode == 'n' and count >= max_of(r, key) then return true end
  end
  return false
end

local function free(r, blocked, kept)
  for key, mode in pairs(r.keys) do
    if mode == 'n' and shut_until(key) > now then return false end
    if blocked[key] and conflicts(mode, blocked[key]) then return false end
    local count = 0
    for _, m in pairs(holders_of(key)) do
      if conflicts(mode, m) then return false end
      count = count + 1
    end
    if mode == 'n' and count + (kept[key] or 0) >= max_of(r, key) then return false end
  end
  return true
end

local function final(r) return r.final ~= false end

local function granted(id, r, until_us)
  if not final(r) then until_us = '0' end
  return {id = id, tokens = r.tokens, lease_until_us = until_us, final = final(r),
          keys = r.keys, whole = r.whole, lease_s = r.lease_s, run = r.run, call = r.call,
          notify = r.notify, limits = r.limits, tenant = r.tenant}
end

local function grant(id, r)
  if r.brief then r = cjson.decode(redis.call('HGET', REQ, id)) end
  local mine = {}
  if type(r.carried) == 'table' then
    for key, token in pairs(r.carried) do mine[key] = token end
  end
  local keys = {}
  for key in pairs(r.keys) do table.insert(keys, key) end
  table.sort(keys)
  for _, key in ipairs(keys) do
    local last = tonumber(redis.call('HGET', TOKENS, key) or '0')
    local token = math.max(last + 1, now)
    redis.call('HSET', TOKENS, key, fmt(token))
    mine[key] = fmt(token)
    local hs = holders_of(key)
    hs[id] = r.keys[key]
    set_holders(key, hs)
  end
  local count = redis.call('HINCRBY', SERVED, '#', 1)
  redis.call('HSET', SERVED, 't:' .. who(r.tenant), count, 'r:' .. who(r.run), count)
  local until_us = fmt(now + r.lease_s * 1000000)
  if not final(r) then until_us = '+inf' end
  redis.call('ZADD', LEASES, until_us, id)
  r.tokens = mine
  redis.call('HSET', REQ, id, cjson.encode(r))
  redis.call('HDEL', WAITS, id)
  return granted(id, r, until_us)
end

-- the waiting requests in their turn (events/locks.py `fair`): round-robin across
-- tenants in the order they began waiting, within a tenant across its runs likewise,
-- a run's own requests in arrival order
local function waiting()
  local out = {}
  local leased = {}
  for _, id in ipairs(redis.call('ZRANGE', LEASES, 0, -1)) do leased[id] = true end
  local ids = {}
  for _, id in ipairs(redis.call('ZRANGE', ORDER, 0, -1)) do
    if not leased[id] then table.insert(ids, id) end
  end
  for i = 1, #ids, 1000 do  -- one HMGET a thousand (Lua's unpack has a limit)
    local raw = redis.call('HMGET', WAITS, unpack(ids, i, math.min(i + 999, #ids)))
    for j, w in ipairs(raw) do
      local id = ids[i + j - 1]
      local r
      if w then
        w = cjson.decode(w)
        r = {keys = w.k, limits = w.l, tenant = w.t, run = w.u, brief = true}
      else
        r = cjson.decode(redis.call('HGET', REQ, id))  -- queued before `waits` was kept
      end
      table.insert(out, {id, r})
    end
  end
  return out
end

-- names in place by when they were last served, then by first waiting (their index)
local function by_served(names, prefix, served)
  local rank = {}
  for i, name in ipairs(names) do rank[name] = {tonumber(served[prefix .. name] or '0'), i} end
  table.sort(names, function(a, b)
    if rank[a][1] ~= rank[b][1] then return rank[a][1] < rank[b][1] end
    return rank[a][2] < rank[b][2]
  end)
end

-- the waiters (`ws`, in arrival order, less those `done`) in their turn
local function fair(ws, done)
  local tenants, runs, queues = {}, {}, {}
  local served = {}
  local flat = redis.call('HGETALL', SERVED)
  for i = 1, #flat, 2 do served[flat[i]] = flat[i + 1] end
  for _, w in ipairs(ws) do
    local id, r = w[1], w[2]
    if not done[id] then
      local tenant, run = who(r.tenant), who(r.run)
      if not runs[tenant] then
        table.insert(tenants, tenant)
        runs[tenant] = {}
        queues[tenant] = {}
      end
      if not queues[tenant][run] then
        table.insert(runs[tenant], run)
        queues[tenant][run] = {}
      end
      table.insert(queues[tenant][run], w)
    end
  end
  by_served(tenants, 't:', served)
  for _, tenant in ipairs(tenants) do by_served(runs[tenant], 'r:', served) end
  -- each tenant's requests in its own turn (round-robin over its runs), then the k-th of
  -- every tenant, in the tenants' order, before any tenant's (k+1)-th: no sort of them all
  local own, longest = {}, 0
  for ti, tenant in ipairs(tenants) do
    local mine, depth, more = {}, 1, true
    while more do
      more = false
      for _, run in ipairs(runs[tenant]) do
        local q = queues[tenant][run]
        if q[depth] then
          table.insert(mine, q[depth])
          more = true
        end
      end
      depth = depth + 1
    end
    own[ti] = mine
    if #mine > longest then longest = #mine end
  end
  local turns = {}
  for k = 1, longest do
    for ti = 1, #tenants do
      local w = own[ti][k]
      if w then table.insert(turns, {k, ti, w[1], w[2]}) end
    end
  end
  return turns
end

-- one pass over the waiters in their turn; then again while a pass grants any (a grant
-- changes the turn of those left), so every op leaves nothing more to grant. A pass is
-- not taken when every waiter left is stuck behind holders or a closure (`stuck`): it
-- could grant nothing, whatever the turn (events/locks.py `_pass` does the same)
local function pass(ws, done, grants)
  local soft = false
  for _, w in ipairs(ws) do
    if not done[w[1]] and not stuck(w[2]) then
      soft = true
      break
    end
  end
  if not soft then return false end
  local blocked = {}
  local kept = {}
  local any = false
  for _, turn in ipairs(fair(ws, done)) do
    local id, r = turn[3], turn[4]
    if free(r, blocked, kept) then
      table.insert(grants, grant(id, r))
      done[id] = true
      any = true
    else
      for key, mode in pairs(r.keys) do
        if mode == 'w' or not blocked[key] then blocked[key] = mode end
        if mode == 'n' then kept[key] = (kept[key] or 0) + 1 end
      end
    end
  end
  return any
end

-- forget the names with nothing waiting (the table keeps no run's name for ever)
local function forget(ws)
  local live = {}
  for _, w in ipairs(ws) do
    live['t:' .. who(w[2].tenant)] = true
    live['r:' .. who(w[2].run)] = true
  end
  local names = redis.call('HKEYS', SERVED)
  for _, name in ipairs(names) do
    if name ~= '#' and not live[name] then redis.call('HDEL', SERVED, name) end
  end
end

local function pump()
  local grants = {}
  local ws = waiting()  -- decoded once: a pass only takes some of them out
  forget(ws)
  if redis.call('HLEN', WAITS) > #ws then  -- left by a worker of the older script
    local live = {}
    for _, w in ipairs(ws) do live[w[1]] = true end
    for _, id in ipairs(redis.call('HKEYS', WAITS)) do
      if not live[id] then redis.call('HDEL', WAITS, id) end
    end
  end
  local done = {}
  while pass(ws, done, grants) do end
  return grants
end

local function drop(id)
  local raw = redis.call('HGET', REQ, id)
  if not raw then return nil end
  local r = cjson.decode(raw)
  for key, mode in pairs(r.keys) do
    local hs = holders_of(key)
    local slot = false
    for _, m in pairs(hs) do if m == 'n' then slot = true end end
    hs[id] = nil
    set_holders(key, hs)
    if slot and next(hs) == nil then redis.call('HDEL', TOKENS, key) end
  end
  redis.call('HDEL', REQ, id)
  redis.call('HDEL', WAITS, id)
  redis.call('ZREM', ORDER, id)
  redis.call('ZREM', LEASES, id)
  return r
end

local out = {grants = {}, expired = {}, renewed = false}
if op == 'enqueue' then
  local asked = cjson.decode(ARGV[3])
  local again = {}
  local added = false
  for _, r in ipairs(asked) do
    local req = {keys = r.keys, lease_s = r.lease_s, run = r.run, call = r.call, notify = r.notify,
                 final = final(r), carried = r.carried, whole = r.whole, limits = r.limits,
                 tenant = r.tenant}
    if redis.call('HSETNX', REQ, r.id, cjson.encode(req)) == 1 then
      redis.call('HSET', WAITS, r.id, cjson.encode({k = r.keys, l = r.limits, t = r.tenant, u = r.run}))
      redis.call('ZADD', ORDER, redis.call('INCR', SEQ), r.id)
      added = true
    elseif redis.call('ZSCORE', LEASES, r.id) then
      table.insert(again, r.id)  -- asked again: say what it holds (a partial hold: always)
    end
  end
  -- every op leaves the table with nothing more to grant, so asking again for what
  -- is queued grants nothing: no pass over the waiters (the sweeper re-asks often)
  if added then out.grants = pump() end
  local seen = {}
  for _, id in ipairs(again) do
    local r = cjson.decode(redis.call('HGET', REQ, id))
    if not seen[id] and (ARGV[4] == '1' or not final(r)) then
      table.insert(out.grants, granted(id, r, redis.call('ZSCORE', LEASES, id)))
    end
    seen[id] = true
  end
elseif op == 'release' then
  local any = false
  for _, id in ipairs(cjson.decode(ARGV[3])) do
    if drop(id) then any = true end
  end
  if any then out.grants = pump() end
elseif op == 'renew' then
  local held = redis.call('ZSCORE', LEASES, ARGV[3])
  if held and tonumber(held) ~= math.huge then
    local r = cjson.decode(redis.call('HGET', REQ, ARGV[3]))
    redis.call('ZADD', LEASES, fmt(now + r.lease_s * 1000000), ARGV[3])
    out.renewed = true
  end
elseif op == 'expire' then
  local gone = redis.call('ZRANGEBYSCORE', LEASES, '-inf', fmt(now))
  table.sort(gone)
  for _, id in ipairs(gone) do
    local r = drop(id)
    table.insert(out.expired, {id = id, run = r.run, call = r.call, whole = r.whole, keys = r.keys})
  end
  local lapsed = 0
  local shut = redis.call('HGETALL', CLOSED)
  for i = 1, #shut, 2 do
    if tonumber(shut[i + 1]) <= now then
      redis.call('HDEL', CLOSED, shut[i])
      lapsed = lapsed + 1
    end
  end
  if #gone > 0 or lapsed > 0 then out.grants = pump() end
  local partial = redis.call('ZRANGEBYSCORE', LEASES, '+inf', '+inf')
  local arrived = {}
  for _, id in ipairs(partial) do arrived[id] = tonumber(redis.call('ZSCORE', ORDER, id)) end
  table.sort(partial, function(x, y) return arrived[x] < arrived[y] end)
  for _, id in ipairs(partial) do
    table.insert(out.grants, granted(id, cjson.decode(redis.call('HGET', REQ, id)), '0'))
  end
elseif op == 'close' then
  local shut = cjson.decode(ARGV[3])
  for key, for_s in pairs(shut) do
    local until_us = now + tonumber(for_s) * 1000000
    if until_us > tonumber(redis.call('HGET', CLOSED, key) or '0') then
      redis.call('HSET', CLOSED, key, fmt(until_us))
    end
  end
  out.told = {}
  for _, id in ipairs(redis.call('ZRANGE', ORDER, 0, -1)) do
    if not redis.call('ZSCORE', LEASES, id) then
      local r = cjson.decode(redis.call('HGET', REQ, id))
      local on = false
      for key in pairs(r.keys) do if shut[key] then on = true end end
      if on and r.notify then table.insert(out.told, r.notify) end
    end
  end
  if #out.told == 0 then out.told = cjson.decode('[]') end
elseif op == 'usage' then
  -- every slot key in use, waited for or closed: [holders, waiters, closed until us or 0]
  local use = {}
  local function at(key)
    if not use[key] then use[key] = {0, 0, '0'} end
    return use[key]
  end
  local held = redis.call('HGETALL', HOLDERS)
  for i = 1, #held, 2 do
    local n, slot = 0, false
    for _, m in pairs(cjson.decode(held[i + 1])) do
      n = n + 1
      if m == 'n' then slot = true end
    end
    if slot then at(held[i])[1] = n end
  end
  for _, id in ipairs(redis.call('ZRANGE', ORDER, 0, -1)) do
    if not redis.call('ZSCORE', LEASES, id) then
      for key, mode in pairs(cjson.decode(redis.call('HGET', REQ, id)).keys) do
        if mode == 'n' then at(key)[2] = at(key)[2] + 1 end
      end
    end
  end
  local shut = redis.call('HGETALL', CLOSED)
  for i = 1, #shut, 2 do
    if tonumber(shut[i + 1]) > now then at(shut[i])[3] = shut[i + 1] end
  end
  out.keys = use
elseif op == 'look' then
  out.keys = {}
  for _, key in ipairs(cjson.decode(ARGV[3])) do
    local count = 0
    for _ in pairs(holders_of(key)) do count = count + 1 end
    local shut = tonumber(redis.call('HGET', CLOSED, key) or '0')
    if shut <= now then shut = 0 end
    out.keys[key] = {count, fmt(shut)}
  end
else
  return redis.error_reply('unknown op ' .. tostring(op))
end
if #out.grants == 0 then out.grants = cjson.decode('[]') end
if #out.expired == 0 then out.expired = cjson.decode('[]') end
return cjson.encode(out)
