"""`python -m tests.chaos [--runs N] [--kills K] [--only a,b] [--json]`: run the
scenarios, print their figures, exit 1 when any of the issue's zeros fails."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from tests.chaos.report import table
from tests.chaos.scenarios import SCENARIOS, Size
from tests.chaos.tally import Figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    p.add_argument(
        "--runs",
        type=int,
        default=Size.runs,
        help="runs of the kill scenario (more until its last kill)",
    )
    p.add_argument("--kills", type=int, help="worker SIGKILLs (default: runs / 5)")
    p.add_argument("--processes", type=int, default=Size.processes, help="worker processes")
    p.add_argument("--in-flight", type=int, default=Size.in_flight, help="runs under way at once")
    p.add_argument(
        "--kill-every", type=float, default=Size.kill_every_s, help="mean seconds between kills"
    )
    p.add_argument("--garbage", type=int, default=Size.garbage, help="garbage inbox entries")
    p.add_argument("--valid", type=int, default=Size.valid, help="valid inbox entries among them")
    p.add_argument("--outage", type=float, default=Size.outage_s, help="seconds Redis is frozen")
    p.add_argument("--only", help=f"comma-separated, of: {', '.join(SCENARIOS)}")
    p.add_argument("--json", action="store_true", help="one JSON object per scenario")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    p.add_argument(
        "--verbose", action="store_true", help="say which run recovered slowest per fault"
    )
    args = p.parse_args(argv)
    size = replace(
        Size(), runs=args.runs, kills=args.kills if args.kills is not None else args.runs // 5,
        processes=args.processes, in_flight=args.in_flight, kill_every_s=args.kill_every,
        garbage=args.garbage, valid=args.valid, outage_s=args.outage,
    )  # fmt: skip
    names = args.only.split(",") if args.only else list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenario {unknown[0]!r}; choose from {', '.join(SCENARIOS)}")
    tmp = Path(tempfile.mkdtemp(prefix="agentledger-chaos-"))
    results: list[Figures] = []
    began = time.monotonic()
    for name in names:
        try:
            figures = SCENARIOS[name](tmp, size)
        except Exception as exc:  # a scenario that breaks is a failed figure, not a traceback
            figures = Figures(name)
            figures.failures.append(f"{type(exc).__name__}: {exc}")
        results.append(figures)
        if args.json:
            print(json.dumps(figures.as_dict()), flush=True)
        else:
            print(table([figures]), flush=True)
            if args.verbose:
                print("\n".join(f"  slowest: {s}" for s in figures.slowest), flush=True)
    failed = [f for f in results if f.failures]
    if not args.json:
        print(
            f"\nchaos: {len(results)} scenarios in {time.monotonic() - began:.0f}s, "
            f"{len(failed)} failed" + (f"; logs in {tmp}" if args.keep or failed else "")
        )
    if not (args.keep or failed):
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
