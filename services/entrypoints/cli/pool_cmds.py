"""What the pools are doing: `workers --list` (the live workers of every task
queue and tool set, with the messages each holds) and `dead-letters` (the
messages a queue gave up on, and re-driving one back to its queue), through the
broker's admin port (`agentledger.services.adapters.broker.admin_port`)."""

from __future__ import annotations

from dataclasses import asdict

from agentledger.events.commands import Pool
from agentledger.events.counted import counted
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.reply import emit, fail
from agentledger.services.session import Session

OK = 0


def list_workers(session: Session, *, as_json: bool) -> int:
    found = session.admin.members()
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


def show_dead_letters(session: Session, *, queue: str | None, as_json: bool) -> int:
    found = session.admin.dead_letters(queue)
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
    if not session.admin.redrive(queue, toolset, pool, int(shard), entry):
        return fail(exit_codes.USAGE, "no dead letter", f"no dead letter {handle!r}", as_json)
    if as_json:
        emit({"redriven": handle, "queue": queue, "pool": pool})
    else:
        print(f"re-drove {handle}: back on queue {queue!r} ({pool})")
    return OK
