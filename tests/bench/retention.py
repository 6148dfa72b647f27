"""R, retention: Redis bytes per finished run before and after a retention pass.
One finished run is made through the full path (intake, worker, a one-call run
of the scripted agent); then, on a fresh private redis-server, its log is written
again as N runs of their own (new run and event ids, each with its request key
as the intake sets one) through the store adapter — the full path would take
N × W2's time — and INFO memory's used_memory is read before they were written,
after, and after one retention pass (`agentledger.services.handlers.archiver`)
to an archive folder, which is timed. Run alone: `python -m tests.bench.retention
[N]`."""

from __future__ import annotations

import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from agentledger.events.retention import RetentionPolicy
from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.archive.archive import Archive, open_cold_store
from agentledger.services.adapters.store.request_keys import RedisRequestKeys
from agentledger.services.clock import new_run_id
from agentledger.services.handlers.archiver import retention_pass
from agentledger.services.settings import Settings, from_env
from tests.bench.harness import BENCH_PUBLISHER, Bench, Follower, private_bench
from tests.bench.plan import bench_spec, request_for


def template(bench: Bench, prefix: str) -> list[Envelope[Any]]:
    """The log of one finished one-call run, made through the full path."""
    with bench.workers(prefix, 1) as pool:
        follow = Follower(bench.client, pool.keys, bench.signer)
        request = request_for(bench_spec(1))
        follow.submit(pool.keys, [request])
        follow.wait([str(request.run_id)], timeout_s=60)
    return bench.store(prefix).read(str(request.run_id))


def measure(settings: Settings, tmp: Path, log: list[Envelope[Any]], runs: int) -> dict[str, Any]:
    with private_bench(settings, tmp, "everysec") as fresh:
        prefix = "bench-retention"
        keys, store = fresh.keys(prefix), fresh.store(prefix)
        requests = RedisRequestKeys(fresh.client, keys)
        before, keys_before = _used(fresh), fresh.client.dbsize()
        started = time.time()
        for n in range(runs):
            _write_copy(fresh, store, requests, log, n)
        written_s = time.time() - started
        after_runs = _used(fresh)
        archive = Archive(open_cold_store(str(tmp / "archive")), prefix)
        began = time.perf_counter()
        report = retention_pass(store, archive, requests, RetentionPolicy(0.0), now=time.time() + 1)
        pass_s = time.perf_counter() - began
        after_pass, keys_after = _used(fresh), fresh.client.dbsize()
    archived_bytes = sum(p.stat().st_size for p in (tmp / "archive").rglob("*.seg"))
    return {
        "runs": runs, "events_per_run": len(log), "archived": len(report.archived),
        "failed": len(report.failed), "used_before": before, "used_with_runs": after_runs,
        "used_after_pass": after_pass, "keys_before": keys_before, "keys_after": keys_after,
        "bytes_per_run_before": (after_runs - before) / runs,
        "bytes_per_run_after": (after_pass - before) / runs,
        "after_over_before_pct": 100.0 * (after_pass - before) / before,
        "archive_bytes_per_run": archived_bytes / runs,
        "write_s": written_s, "pass_s": pass_s, "archived_per_s": runs / pass_s,
    }  # fmt: skip


def _used(bench: Bench) -> int:
    """used_memory with one client connected, as before the runs were written (the
    archiver's threads each held a connection: their buffers are not the runs')."""
    bench.client.connection_pool.disconnect()
    return int(bench.client.info("memory")["used_memory"])


def _write_copy(
    bench: Bench, store: Any, requests: RedisRequestKeys, log: list[Envelope[Any]], n: int
) -> None:
    """The log again as a run of its own, with its request key, as the intake writes one."""
    run_id = new_run_id(n % bench.settings.shards)
    request_id = f"req-{n}"
    first = log[0].data.model_copy(update={"request_id": request_id, "publisher": BENCH_PUBLISHER})
    events = [
        env.model_copy(update={"run_id": run_id, "id": uuid.uuid4().hex, **({"data": first} if env.seq == 1 else {})})
        for env in log
    ]  # fmt: skip
    store.append(run_id, events, expected_seq=0, live=False)
    name = requests.name(BENCH_PUBLISHER, request_id)
    bench.client.set(name, f"{run_id} {uuid.uuid4().hex}{uuid.uuid4().hex}", nx=True)


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 10_000
    settings = from_env()
    with tempfile.TemporaryDirectory(prefix="agentledger-retention-") as tmp:
        with private_bench(settings, Path(tmp), "everysec") as bench:
            log = template(bench, "bench-template")
        print(json.dumps(measure(settings, Path(tmp) / "fresh", log, runs), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
