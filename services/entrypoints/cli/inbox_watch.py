"""What a publisher on the CLI can learn about the inbox: whether an intake is
reading it (`intake_liveness`, the one place that judges it), whether an
entry was taken, what the intake said about it, and taking back an entry no
intake has read (so a message nobody took never acts later by surprise)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import redis

from services.keys import Keys
from services.loops.intake import GROUP

RECENT_S = 5.0  # a consumer that read this recently is live; an entry unread this long: none is

_WITHDRAW = """
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
"""


class Liveness(StrEnum):
    LIVE = "live"  # an intake read the inbox within RECENT_S
    NONE = "none"  # no intake ever read it, or entries wait unread longer than RECENT_S
    UNKNOWN = "unknown"  # all read, none lately: an idle intake, or a dead one


def intake_liveness(client: redis.Redis, keys: Keys, *, now_ms: int) -> Liveness:
    """Judged from the inbox's consumer group (a worker registry may replace this)."""
    try:
        groups = client.xinfo_groups(keys.inbox)
    except redis.ResponseError:  # no inbox stream: nobody ever started an intake here
        return Liveness.NONE
    group = next((g for g in groups if g["name"].decode() == GROUP), None)
    if group is None:
        return Liveness.NONE
    consumers = client.xinfo_consumers(keys.inbox, GROUP)
    if any(int(c["idle"]) < RECENT_S * 1000 for c in consumers):
        return Liveness.LIVE
    last = group["last-delivered-id"].decode()
    unread: Any = client.xrange(keys.inbox, min=f"({last}", count=1)
    if unread and now_ms - int(unread[0][0].decode().split("-")[0]) > RECENT_S * 1000:
        return Liveness.NONE
    return Liveness.UNKNOWN


def taken(client: redis.Redis, keys: Keys, entry_id: str) -> bool:
    """The intake group has read the entry (or it is gone)."""
    for group in client.xinfo_groups(keys.inbox):
        if group["name"].decode() == GROUP:
            return _id(group["last-delivered-id"].decode()) >= _id(entry_id)
    return False


def withdraw(client: redis.Redis, keys: Keys, entry_id: str) -> bool:
    """Delete the entry if no intake has read it yet; True when it was deleted."""
    return bool(client.eval(_WITHDRAW, 1, keys.inbox, GROUP, entry_id))


def rejected_reason(client: redis.Redis, keys: Keys, entry_id: str) -> str | None:
    """Why the intake refused the entry, if it did (its rejection comes after it)."""
    rejected: Any = client.xrange(keys.rejected, min=entry_id, count=1000)
    for _, fields in rejected:
        if fields.get(b"entry_id", b"").decode() == entry_id:
            return str(fields.get(b"reason", b"").decode())
    return None


def _id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)
