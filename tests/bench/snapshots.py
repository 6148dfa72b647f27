"""S, the cost of workspace snapshots (issue 39): a workspace of 1,000 files of 10 kB
(10 MB in 20 folders), one file written between the two snapshots a write call is
wrapped in; the added time per write call is the two snapshots' (the write itself is
not counted), wall and CPU, medians and p90 of `rounds`. Run as
`python -m tests.bench.snapshots [ROUNDS]`; prints one JSON line."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from agentledger.services.adapters.snapshots.store import SnapshotStore
from agentledger.services.adapters.snapshots.taker import RACY_NS, Caps, Snapshotter

FOLDERS, FILES, SIZE = 20, 50, 10_000


def measure(rounds: int = 50) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        for d in range(FOLDERS):
            (ws / f"d{d}").mkdir(parents=True)
            for i in range(FILES):
                (ws / f"d{d}" / f"f{i}.txt").write_bytes(os.urandom(SIZE))
        time.sleep(RACY_NS / 1e9 + 0.1)  # files older than a clock tick, as a real workspace's
        taker = Snapshotter(SnapshotStore(Path(tmp) / "snaps"), Caps(64 << 20, 1 << 30, 100_000))
        t0 = time.perf_counter()
        taker.take(str(ws))
        first_ms = (time.perf_counter() - t0) * 1e3
        wall, cpu = [], []
        for _ in range(rounds):
            w0, c0 = time.perf_counter(), time.process_time()
            taker.take(str(ws))
            w1, c1 = time.perf_counter(), time.process_time()
            (ws / "d3" / "f7.txt").write_bytes(os.urandom(SIZE))  # the call's write
            w2, c2 = time.perf_counter(), time.process_time()
            taker.take(str(ws))
            wall.append((time.perf_counter() - w2 + w1 - w0) * 1e3)
            cpu.append((time.process_time() - c2 + c1 - c0) * 1e3)
    wall.sort()
    cpu.sort()
    p90 = int(0.9 * rounds)
    return {
        "first_snapshot_ms": round(first_ms, 2),
        "per_write_wall_ms_median": round(median(wall), 2),
        "per_write_wall_ms_p90": round(wall[p90], 2),
        "per_write_cpu_ms_median": round(median(cpu), 2),
        "per_write_cpu_ms_p90": round(cpu[p90], 2),
        "load_1m": os.getloadavg()[0],
    }


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 50)))
