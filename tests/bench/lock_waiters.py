"""The lock script's cost with many waiters (docs/guide/limits.md, fairness): 64 runs
× 8 calls (4 tenants) ask one concurrency key with `max: 10` — 10 hold, 502 wait —
then each holder is released in turn through `RedisLocks` (each release grants the
next waiter), and the time of each release script call is taken; optionally every
call also names a resource lock of its own run's (`--locks`), so the partition has
as many other keys as waiters. On a private redis-server (the machine's binary, no
persistence), so its command statistics give the script's own time per call beside
the round trip's. `python -m tests.bench.lock_waiters [--runs 64] [--calls 8]
[--releases 100] [--locks]`."""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import tempfile
import time

from agentledger.events.lock_step import LockAsk
from agentledger.events.locks import Mode
from agentledger.services.adapters.locks.redis_locks import RedisLocks
from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.keys import Keys

KEY = "limit:svc:bench"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=64)
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--releases", type=int, default=100)
    ap.add_argument("--locks", action="store_true", help="each call also locks a file of its run")
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = tempfile.mkdtemp()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", folder],
        stdout=subprocess.DEVNULL,
    )
    client = redis_client(f"redis://127.0.0.1:{port}/0")
    for _ in range(100):
        try:
            client.ping()
            break
        except Exception:  # noqa: BLE001 -- not up yet
            time.sleep(0.05)
    locks = RedisLocks(client, Keys("bench", 4), lease_s=600)
    asks = []
    for r in range(a.runs):
        for c in range(a.calls):
            keys = {KEY: Mode.SLOT}
            if a.locks:
                keys[f"file:/w/run{r}/f{c}"] = Mode.WRITE
            asks.append(LockAsk(f"run{r}", f"c{c}", f"run{r}/c{c}", keys, {KEY: 10}, f"t{r % 4}"))
    try:
        held = [g.grant.id for g in locks.enqueue(asks, [None] * len(asks)).grants]
        client.config_resetstat()
        by_id = {x.request_id: x for x in asks}
        took: list[float] = []
        while held and len(took) < a.releases:
            rid = held.pop(0)
            t0 = time.perf_counter()
            reply = locks.release([by_id[rid]])
            took.append((time.perf_counter() - t0) * 1000)
            held += [g.grant.id for g in reply.grants]
        ms = sorted(took)
        stats = client.info("commandstats").get("cmdstat_evalsha", {})
        print(
            f"{len(asks)} calls, {len(asks) - 10} waiting at first, {len(took)} releases: "
            f"median {statistics.median(ms):.2f} ms, p90 {ms[int(len(ms) * 0.9)]:.2f} ms, "
            f"max {ms[-1]:.2f} ms; in Redis {stats.get('usec_per_call', 0) / 1000:.2f} ms a call"
        )
    finally:
        client.close()
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
