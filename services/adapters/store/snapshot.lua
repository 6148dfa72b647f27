-- Keep a run's snapshot (keep_snapshot.lua, prepended).
-- KEYS: run snapshot
-- ARGV: version, seq, event id at seq, state, ttl_ms, spec ('' for none), then (page n, blob)*
keep_snapshot(KEYS[1], ARGV, 1, #ARGV)
return 1
