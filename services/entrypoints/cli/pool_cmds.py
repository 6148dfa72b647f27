"""What the pools are doing: `workers --list` (the live workers of every task
queue and tool set, with the messages each holds) and `dead-letters` (the
messages a queue gave up on, and re-driving one back to its queue)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

import redis
from dramatiq import Message

from events.commands import Pool
from events.counted import counted
from services.adapters.broker.streams_queue import GROUP
from services.adapters.redis.directory import Directory
from services.bootstrap import shards_ever
from services.entrypoints.cli import exit_codes
from services.entrypoints.cli.reply import emit, fail
from services.session import Session
from services.keys import Keys

SCAN_COUNT = 500
OK = 0


@dataclass(frozen=True, slots=True)
class Worker:
    worker: str
    queue: str
    toolset: str
    modules: list[str]
    pools: list[str]
    in_flight: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    handle: str  # queue:toolset:pool:shard:entry, what --redrive takes
    queue: str
    toolset: str
    pool: str
    shard: int
    entry: str
    reason: str
    deliveries: int
    actor: str
    run_id: str | None


def queues(client: redis.Redis, keys: Keys) -> list[str]:
    """Every task queue a worker has ever registered a tool set under."""
    head = keys.toolsets("")
    found = {
        (k.decode() if isinstance(k, bytes) else k)[len(head) :]
        for k in client.scan_iter(match=f"{head}*", count=SCAN_COUNT)
    }
    return sorted(found)


def live_workers(session: Session) -> list[Worker]:
    client, keys = session.client, session.keys
    directory = Directory(client, keys, member_ttl_s=session.settings.member_ttl_s)
    shards = shards_ever(client, keys, record=False)  # a read: ops may run it
    found: list[Worker] = []
    for queue in queues(client, keys):
        for toolset, manifest in directory.toolsets(queue).items():
            pools: dict[str, list[str]] = defaultdict(list)
            for pool in Pool:
                for worker in directory.live(queue, toolset, pool):
                    pools[worker].append(str(pool))
            if not pools:
                continue
            held = _in_flight(
                client, [keys.queue(s, queue, toolset, str(p)) for s in shards for p in Pool]
            )
            found += [
                Worker(w, queue, toolset, list(manifest.get("modules", [])), ps, held.get(w, 0))
                for w, ps in sorted(pools.items())
            ]
    return found


def _in_flight(client: redis.Redis, streams: list[str]) -> dict[str, int]:
    """Per consumer, the messages delivered and not yet acked, over these streams."""
    with client.pipeline(transaction=False) as pipe:
        for stream in streams:
            pipe.exists(stream)
        present = [s for s, there in zip(streams, pipe.execute(), strict=True) if there]
    held: dict[str, int] = defaultdict(int)
    with client.pipeline(transaction=False) as pipe:
        for stream in present:
            pipe.xpending(stream, GROUP)
        replies = pipe.execute(raise_on_error=False)
    for reply in replies:
        if isinstance(reply, dict):
            for consumer in reply.get("consumers") or []:
                name = consumer["name"]
                held[name.decode() if isinstance(name, bytes) else name] += int(consumer["pending"])
    return held


def list_workers(session: Session, *, as_json: bool) -> int:
    found = live_workers(session)
    if as_json:
        emit({"workers": [asdict(w) for w in found]})
        return OK
    if not found:
        print("no live workers")
    for w in found:
        modules = ", ".join(w.modules) or "built-in tools only"
        print(
            f"{w.worker}  queue {w.queue!r}  tool set {w.toolset} ({modules})  "
            f"pools {','.join(w.pools)}  in flight {w.in_flight}"
        )
    return OK


def dead_letters(session: Session, *, queue: str | None) -> list[DeadLetter]:
    client, keys = session.client, session.keys
    directory = Directory(client, keys, member_ttl_s=session.settings.member_ttl_s)
    found: list[DeadLetter] = []
    for q in [queue] if queue else queues(client, keys):
        for toolset in directory.toolsets(q):
            for shard in shards_ever(client, keys, record=False):
                for pool in Pool:
                    dead = keys.queue_dead(keys.queue(shard, q, toolset, str(pool)))
                    entries: list[tuple[bytes, dict[bytes, bytes]]] = client.xrange(dead)  # type: ignore[assignment]
                    for entry, fields in entries:
                        found.append(_dead_letter(q, toolset, str(pool), shard, entry, fields))
    return found


def _dead_letter(
    queue: str, toolset: str, pool: str, shard: int, entry: bytes, fields: dict[bytes, bytes]
) -> DeadLetter:
    entry_id = entry.decode()
    actor, run_id = _what(fields.get(b"m", b""))
    return DeadLetter(
        handle=f"{queue}:{toolset}:{pool}:{shard}:{entry_id}",
        queue=queue, toolset=toolset, pool=pool, shard=shard, entry=entry_id,
        reason=fields.get(b"reason", b"?").decode(errors="replace"),
        deliveries=int(fields.get(b"deliveries", b"0") or 0),
        actor=actor, run_id=run_id,
    )  # fmt: skip


def _what(data: bytes) -> tuple[str, str | None]:
    """The actor and run a message is for; '?' when it cannot be decoded."""
    try:
        message: Message[Any] = Message.decode(data)
    except Exception:  # noqa: BLE001 - an undecodable letter is shown, not raised
        return "?", None
    run_id = message.args[0] if message.args and isinstance(message.args[0], str) else None
    return message.actor_name, run_id


def show_dead_letters(session: Session, *, queue: str | None, as_json: bool) -> int:
    found = dead_letters(session, queue=queue)
    if as_json:
        emit({"dead_letters": [asdict(d) for d in found], "queue": queue})
        return OK
    if not found:
        print("no dead letters" + (f" in queue {queue!r}" if queue else ""))
    for d in found:
        print(
            f"{d.handle}  {d.actor} run {d.run_id or '?'}  {d.reason} "
            f"after {counted(d.deliveries, 'delivery', 'deliveries')}"
        )
    if found:
        print("re-drive one: agentledger dead-letters --redrive HANDLE")
    return OK


# KEYS: dead stream, queue stream (one hash tag); ARGV: entry id.
# Moves the letter back to its queue in one step: 1 when moved, 0 when not there.
_REDRIVE = """
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #found == 0 then return 0 end
local fields = found[1][2]
for i = 1, #fields, 2 do
  if fields[i] == 'm' then redis.call('XADD', KEYS[2], '*', 'm', fields[i + 1]) end
end
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
"""


def redrive(session: Session, handle: str, *, as_json: bool) -> int:
    parts = handle.split(":")
    if len(parts) != 5 or not parts[3].isdigit():
        return fail(
            exit_codes.USAGE, "bad handle",
            f"{handle!r} is not QUEUE:TOOLSET:POOL:SHARD:ENTRY (as `dead-letters` prints it)",
            as_json,
        )  # fmt: skip
    queue, toolset, pool, shard, entry = parts
    if pool not in {str(p) for p in Pool}:
        return fail(exit_codes.USAGE, "bad handle", f"{pool!r} is not a pool", as_json)
    keys = session.keys
    stream = keys.queue(int(shard), queue, toolset, pool)
    moved = session.client.eval(_REDRIVE, 2, keys.queue_dead(stream), stream, entry)
    if not moved:
        return fail(exit_codes.USAGE, "no dead letter", f"no dead letter {handle!r}", as_json)
    if as_json:
        emit({"redriven": handle, "queue": queue, "pool": pool})
    else:
        print(f"re-drove {handle}: back on queue {queue!r} ({pool})")
    return OK
