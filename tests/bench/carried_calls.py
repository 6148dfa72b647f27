"""One run of N no-op calls (`bench_noop`, declared quick) carried in one delivery
in this thread, over the unit tier's app (`tests/unit/handlerkit.py`) but with the
real Redis event store — the worker's hot path without the broker — for
instruction counts that the machine's load does not move:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python -m tests.bench.carried_calls 40     # then 240: the difference / 200

prints the CPU a call took (that one moves with the load) and `--profile FILE`
writes a cProfile dump. The Redis is REDIS_URL (default 127.0.0.1:6379): its keys
go under a prefix of their own, removed at the end."""

from __future__ import annotations

import argparse
import cProfile
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.carried_calls", description=__doc__)
    p.add_argument("calls", type=int, nargs="?", default=200)
    p.add_argument("--profile", type=Path)
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    import redis

    import tests.unit.handlerkit as hk
    from agentledger.events.commands import RequestModel
    from agentledger.services.adapters.models.choice import model_for
    from agentledger.services.adapters.store.redis_store import RedisEventStore
    from agentledger.services.adapters.tools.toolset import load_toolset
    from agentledger.services.keys import Keys
    from agentledger.services.settings import Settings

    settings = Settings()
    hk.scripted = lambda m: model_for(m, settings)  # as a worker: one adapter per spec
    tools = str(ROOT / "tests" / "bench")
    hk._TOOLSET.append(load_toolset(["bench_tools"], [tools]))
    spec = hk.spec(
        *[{"tool_use": [hk.call(f"c{i}", "bench_noop", n=i)]} for i in range(args.calls)],
        {"end_turn": "done"},
        max_turns=args.calls + 5,
        repeat_limit=args.calls + 5,
    ).model_copy(update={"tools": ("bench_tools",), "tool_path": (tools,)})
    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    prefix = f"carried-{uuid.uuid4().hex[:8]}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            unit = hk.new_unit(Path(tmp) / "ws", carry=hk.carrying(for_s=1e9))
            unit.store._inner._inner = RedisEventStore(client, Keys(prefix, 1))  # type: ignore[attr-defined]
            unit.create("run-a", spec)
            profile = cProfile.Profile() if args.profile else None
            started = time.process_time()
            if profile:
                profile.enable()
            unit.deliver(RequestModel("run-a"))
            if profile:
                profile.disable()
                profile.dump_stats(str(args.profile))
            cpu_ms = (time.process_time() - started) / args.calls * 1000
            print(f"{cpu_ms:.3f} ms of CPU a call ({unit.app.runs.load('run-a').status})")  # type: ignore[union-attr]
    finally:
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("AGENTLEDGER_SANDBOX", "off")
    sys.exit(main())
