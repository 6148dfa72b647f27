"""One stream of a worker queue on Redis (one pool of a task queue, for one tool
set, in one shard): a stream read by a consumer group, a sorted set of delayed
messages by due time, and a dead-letter stream, all under the shard's hash tag. Every multi-key step is one script or one MULTI, so a crash never
leaves a message both queued and dead, or acked and still delivered.

Delivery counting is Redis's own: XREADGROUP delivers once, every reclaim adds
one. A worker that holds entries re-claims them to itself on each tick (the
heartbeat, which does not count), so only a dead or stuck worker's entries go
idle and are taken over; after `max_deliveries` they are dead-lettered."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis

GROUP = "workers"
DEAD_MAXLEN = 10_000  # approximate; dead letters are for inspection, not storage
PRUNE_IDLE_MS = 60_000  # a consumer with nothing pending, silent this long, is forgotten

# KEYS: stream, delayed, dead
# ARGV: group, consumer, now_ms, claim_idle_ms, claim_count, max_deliveries, dead_maxlen, prune_ms
TICK_LUA = """
local stream, delayed, dead = KEYS[1], KEYS[2], KEYS[3]
local group, me, now = ARGV[1], ARGV[2], ARGV[3]
local claim_count, max_deliveries = tonumber(ARGV[5]), tonumber(ARGV[6])
redis.pcall('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')

for _, m in ipairs(redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 100)) do
  redis.call('XADD', stream, '*', 'm', m)
  redis.call('ZREM', delayed, m)
end
local next_due = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')[2] or false

local mine = redis.call('XPENDING', stream, group, '-', '+', 1000, me)
if #mine > 0 then
  local args = {'XCLAIM', stream, group, me, 0}
  for _, p in ipairs(mine) do table.insert(args, p[1]) end
  table.insert(args, 'JUSTID')
  redis.call(unpack(args))
end

local claimed = {}
if claim_count > 0 then
  local idle = redis.call('XAUTOCLAIM', stream, group, me, ARGV[4], '0-0', 'COUNT', claim_count, 'JUSTID')
  for _, id in ipairs(idle[2]) do
    local entry = redis.call('XCLAIM', stream, group, me, 0, id)[1]
    if not entry then
      redis.call('XACK', stream, group, id)
    else
      local n = redis.call('XPENDING', stream, group, id, id, 1)[1][4]
      local m = entry[2][2]
      if n > max_deliveries then
        redis.call('XADD', dead, 'MAXLEN', '~', ARGV[7], '*',
          'm', m, 'reason', 'deliveries', 'entry', id, 'deliveries', n)
        redis.call('XACK', stream, group, id)
        redis.call('XDEL', stream, id)
      else
        table.insert(claimed, {id, m, n})
      end
    end
  end
end

for _, flat in ipairs(redis.call('XINFO', 'CONSUMERS', stream, group)) do
  local c = {}
  for i = 1, #flat, 2 do c[flat[i]] = flat[i + 1] end
  if c['pending'] == 0 and c['idle'] > tonumber(ARGV[8]) and c['name'] ~= me then
    redis.call('XGROUP', 'DELCONSUMER', stream, group, c['name'])
  end
end
return {next_due, claimed}
"""

# KEYS: stream; ARGV: group, entry ids. Back to the end of the stream, uncounted.
_REQUEUE = """
for i = 2, #ARGV do
  local entry = redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i])[1]
  if entry and redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 then
    redis.call('XADD', KEYS[1], '*', unpack(entry[2]))
    redis.call('XDEL', KEYS[1], ARGV[i])
  end
end
return 0
"""

Entry = tuple[str, bytes, int]  # stream entry id, encoded message, deliveries so far


@dataclass(frozen=True)
class Tick:
    next_due_ms: float | None
    claimed: list[Entry]


@dataclass
class StreamQueue:
    client: redis.Redis
    stream: str
    claim_idle_ms: int
    max_deliveries: int
    _scripts: dict[str, Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.delayed = f"{self.stream}:delayed"
        self.dead = f"{self.stream}:dead"
        self._scripts = {
            "tick": self.client.register_script(TICK_LUA),
            "requeue": self.client.register_script(_REQUEUE),
        }

    def push(self, data: bytes) -> None:
        self.client.xadd(self.stream, {"m": data})

    def push_later(self, data: bytes, due_ms: float) -> None:
        self.client.zadd(self.delayed, {data: due_ms})

    def ack_commands(self, entry_id: str) -> list[tuple[str, ...]]:
        """An ack, as the commands that go out with the next read."""
        return [("XACK", self.stream, GROUP, entry_id), ("XDEL", self.stream, entry_id)]

    def ensure_group(self) -> None:
        try:
            self.client.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if not str(exc).startswith("BUSYGROUP"):
                raise

    def tick(self, consumer: str, *, now_ms: float, claim_count: int, pipe: Any = None) -> Any:
        """Promote due delayed messages, heartbeat our own entries, take over
        idle ones (dead-lettering the over-delivered), forget dead consumers.
        On a pipeline, queue the call and read its reply with `tick_reply`."""
        args = [GROUP, consumer, int(now_ms), self.claim_idle_ms, claim_count]
        args += [self.max_deliveries, DEAD_MAXLEN, PRUNE_IDLE_MS]
        script = self._scripts["tick"]
        keys = [self.stream, self.delayed, self.dead]
        if pipe is not None:
            # as a plain command: a cluster pipeline refuses pipe.evalsha, not EVALSHA itself
            return pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        return tick_reply(script(keys=keys, args=args))

    def dead_letter(self, entry_id: str, data: bytes, *, reason: str, deliveries: int) -> None:
        fields: dict[str, bytes | str | int] = {
            "m": data, "reason": reason, "entry": entry_id, "deliveries": deliveries
        }  # fmt: skip
        with self.client.pipeline() as pipe:
            pipe.xadd(self.dead, fields, maxlen=DEAD_MAXLEN, approximate=True)  # type: ignore[arg-type]
            pipe.xack(self.stream, GROUP, entry_id)
            pipe.xdel(self.stream, entry_id)
            pipe.execute()

    def requeue(self, entry_ids: list[str]) -> None:
        if entry_ids:
            self._scripts["requeue"](keys=[self.stream], args=[GROUP, *entry_ids])

    def size(self) -> int:
        """Messages not yet acked: queued, in flight, or delayed."""
        with self.client.pipeline(transaction=False) as pipe:
            pipe.xlen(self.stream)
            pipe.zcard(self.delayed)
            return sum(pipe.execute())

    def flush(self) -> None:
        self.client.delete(self.stream, self.delayed, self.dead)


def tick_reply(reply: Any) -> Tick:
    next_due, claimed = reply
    entries = [(_text(eid), data, int(n)) for eid, data, n in claimed]
    return Tick(float(next_due) if next_due else None, entries)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
