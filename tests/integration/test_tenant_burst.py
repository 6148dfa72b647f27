"""Tenant A publishes 500 runs (each one model turn of 0.2 s), then tenant B one run,
to one `agentledger workers` process with `AGENTLEDGER_TENANT_SHARE=accept,model`:
B's run completes long before A's 500 (measured: see the printed figures), against
B's time on an idle system. A's 500 and B's one are written in one pipeline (B's
last), so the inbox holds A's backlog ahead of B whatever the machine's load. B
publishes through A's publisher (its request then waits in the same inbox streams
behind A's: the intake reads a backlog in one window and creates its runs
round-robin by tenant) or through its own (the intake reads each publisher's
stream in turn)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import redis
from itkit import QUEUE, file_publisher
from test_tenant_share import spec
from test_worker_sigkill import Workers, workers  # noqa: F401 -- the fixture

from agentledger.events.status import RunStatus
from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.signature import entry as signed_entry
from agentledger.services.adapters.inbox.publishing import partition_for, publish, stamped
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.handlers.state_cache import cache_for
from agentledger.services.keys import Keys
from agentledger.services.settings import Settings

A_RUNS = int(os.environ.get("BURST_RUNS", "500"))
A_TURN_S = 0.2
B_PUBLISHER = "it-publisher-b"


@pytest.fixture
def b_signer(settings: Settings) -> Signer:
    """Tenant B's own publisher, filed before the intake starts (it reads the file once)."""
    file_publisher(Path(settings.publishers_path), B_PUBLISHER)
    return publishers_file.signer(settings.publishers_path, B_PUBLISHER)


@pytest.mark.slow
@pytest.mark.parametrize("b_via", ["A's publisher", "its own publisher"])
def test_tenant_bs_run_is_not_held_behind_tenant_as_500(
    client: redis.Redis,
    keys: Keys,
    b_signer: Signer,  # before `workers`: filed before its intake starts
    b_via: str,
    workers: Workers,  # noqa: F811 -- the fixture
    tools_dir: Path,
    toolset: ToolSet,
    workspace: Path,
    signer: Signer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    share = os.environ.get("BURST_SHARE", "accept,model")  # `accept`: the default, to compare
    spare = os.environ.get("BURST_SPARE", "")  # `model`: a spare slot, to compare
    workers._env.update(
        AGENTLEDGER_TENANT_SHARE=share,
        AGENTLEDGER_MODEL_THREADS="3",
        AGENTLEDGER_TENANT_SPARE=spare,
    )
    workers.start()
    store = cache_for(RedisEventStore(client, keys))

    def asked(rid: str, tenant: str, delay_s: float) -> tuple[RunRequested, Signer]:
        own = tenant == "tenant-b" and b_via == "its own publisher"
        return RunRequested(
            run_id=rid, request_id=rid, spec=spec(tenant, delay_s, tools_dir),
            base_dir=str(workspace.parent), workspace=str(workspace), queue=QUEUE,
            toolset=toolset.fingerprint,
        ), b_signer if own else signer  # fmt: skip

    def ask(rid: str, tenant: str, delay_s: float) -> None:
        message, by = asked(rid, tenant, delay_s)
        publish(client, keys, message, signer=by)

    waits: dict[str, float] = {}

    def done(rid: str, within_s: float, since: float) -> float:
        """From `since` (when it was published, wall clock) to its last event."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            s = store.load(rid)
            if s is not None and not s.status.live:
                assert s.status is RunStatus.COMPLETED
                waits[rid] = s.created_at - since  # in the inbox, for the intake
                return s.updated_at - since
            time.sleep(0.05)
        raise AssertionError(f"{rid} not done within {within_s}s\n{workers.output()}")

    ask("a-warm", "tenant-a", 0.0)  # the worker's first run pays its warm-up
    done("a-warm", 60, time.time())
    at = time.time()
    ask("b-idle", "tenant-b", 0.0)
    idle = done("b-idle", 60, at)
    burst = [asked(f"a-{i}", "tenant-a", A_TURN_S) for i in range(A_RUNS)]
    burst.append(asked("b-1", "tenant-b", 0.0))
    with client.pipeline(transaction=False) as pipe:
        for message, by in burst:
            part = partition_for(message, keys.inbox_partitions)
            body = stamped(message).model_dump_json().encode()
            pipe.xadd(keys.inbox(part, by.name), signed_entry(by.name, by.key, body))  # type: ignore[arg-type]
        started = time.monotonic()
        at = time.time()
        pipe.execute()
    published = time.monotonic() - started
    behind = done("b-1", 300, at)
    a_done = sum(
        1 for i in range(A_RUNS) if (s := store.load(f"a-{i}")) is not None and not s.status.live
    )
    b = store.load("b-1")
    assert b is not None
    a_before = sum(
        1 for i in range(A_RUNS) if (s := store.load(f"a-{i}")) and s.created_at < b.created_at
    )
    with capsys.disabled():
        print(
            f"\n[burst] B via {b_via}: idle {idle:.2f}s; behind A's {A_RUNS} (published in {published:.2f}s): "
            f"{behind:.2f}s published->completed ({waits['b-1']:.2f}s of it in the inbox; idle "
            f"{waits['b-idle']:.2f}s); A's runs done by then: {a_done}, created before B: {a_before}"
        )
    assert a_done < A_RUNS, "B did not wait for all of A's runs"
    assert a_before < A_RUNS // 2, "B's run was admitted before A's backlog, not after it"
    assert behind < 2 * idle + A_TURN_S + 5.0, "the README's bound, with room for a busy machine"
