"""The hot path without Redis: one run of N read calls carried in one delivery over
the memory adapters (tests/unit/handlerkit.py), in this thread; CPU per call for
three repetitions, and with `--profile FILE` Python's function calls per call (a
count that does not move with the machine's load) and a cProfile dump.

    python -m tests.bench.hot_path [--calls 300] [--profile FILE]

Set AGENTLEDGER_SECRETS to a variable holding a key to count the redaction of a
process's secrets as a worker with a publishers file does."""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.hot_path", description=__doc__)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--profile", type=Path, help="a cProfile dump of the last repetition")
    args = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
    from agentledger.events.commands import RequestModel
    from tests.unit.handlerkit import call, carrying, new_unit, spec

    turns = [{"tool_use": [call(f"c{i}", "kv_read", key="k")]} for i in range(args.calls)]
    script = spec(
        *turns, {"end_turn": "done"}, max_turns=args.calls + 5, repeat_limit=args.calls + 5
    )
    for rep in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            unit = new_unit(Path(tmp) / "ws", carry=carrying(for_s=1e9))
            unit.create("run-a", script)
            unit.take()
            profile = cProfile.Profile() if args.profile and rep == 2 else None
            started = time.process_time()
            if profile:
                profile.enable()
            unit.deliver(RequestModel("run-a"))
            if profile:
                profile.disable()
            cpu_ms = (time.process_time() - started) / args.calls * 1000
            status = unit.state("run-a").status
            print(f"rep {rep + 1}: {cpu_ms:.3f} ms of CPU a call ({status})", flush=True)
            if profile:
                stats = pstats.Stats(profile)
                calls = sum(v[1] for v in stats.stats.values()) / args.calls  # type: ignore[attr-defined]
                print(f"{calls:.0f} Python function calls a call; {args.profile} written")
                stats.dump_stats(str(args.profile))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("AGENTLEDGER_SANDBOX", "off")
    sys.exit(main())
