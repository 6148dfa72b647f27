"""W5's first load in a new process: run as `python -m tests.bench.first_load URL
PREFIX RUN_ID`, it connects and prepares as a worker does before its threads start
(none of that timed), then times its very first load of the run (the snapshot's
spec validated, the tail read and folded) and prints the milliseconds as JSON,
with the part of them spent validating the run's spec (a bench run's spec holds
its whole script: ~20 kB for 200 calls)."""

from __future__ import annotations

import json
import sys
import time

from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.bootstrap import prepare_readers
from agentledger.services.handlers import snapshots
from agentledger.services.handlers.state_cache import StateCache
from agentledger.services.keys import keys_for
from agentledger.services.settings import from_env


def main(url: str, prefix: str, run_id: str) -> None:
    client = redis_client(url)
    client.ping()
    store = RedisEventStore(client, keys_for(from_env().with_(prefix=prefix)))
    prepare_readers()
    cache = StateCache(store, snapshot_every=10**12)
    validating = [0.0]
    spec_of = snapshots.spec_of

    def timed_spec_of(blob: bytes) -> RunSpec:
        began = time.perf_counter()
        try:
            return spec_of(blob)
        finally:
            validating[0] += time.perf_counter() - began

    snapshots.spec_of = timed_spec_of  # type: ignore[assignment]
    started = time.perf_counter()
    state = cache.load(run_id)
    took = (time.perf_counter() - started) * 1000
    if state is None:
        raise SystemExit(f"no run {run_id!r} under {prefix!r}")
    print(json.dumps({"first_load_ms": took, "spec_ms": validating[0] * 1000, "seq": state.seq}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
