"""Threads shared between tenants, through real `agentledger workers`: tenant A's 12
runs whose model turns are slow (8 s: the issue's 40 s scaled down) fill the model
pool of a worker process; with `AGENTLEDGER_TENANT_SHARE=accept,model` tenant A
holds at most all but one of its model slots, so tenant B's one-turn run finds one
(its delivery is not let go) and completes while A's turns still run. With neither
(`AGENTLEDGER_TENANT_SPARE=none`), B's run waits for a thread — but for the first of A's
turns to end, not for A's backlog: the pool reads ahead and gives the freed thread
to the tenant served least recently (`agentledger.events.thread_turns`). By default
(`AGENTLEDGER_TENANT_SPARE=model`) the pool has one spare slot for a tenant with
nothing running in it: A's turns use all 3 threads and B's starts at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis
from itkit import QUEUE, TOOL_MODULE
from test_worker_sigkill import Workers, workers  # noqa: F401 -- the fixture

from agentledger.events.status import RunStatus
from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.handlers.state_cache import cache_for
from agentledger.services.keys import Keys

A_RUNS, A_TURN_S, MODEL_THREADS = 12, 8.0, 3
B_WITHIN_S = 5.0  # the target behind 12 runs of slow turns


def spec(tenant: str, delay_s: float, tools_dir: Path) -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": f"a run of {tenant}",
            "tools": [TOOL_MODULE],
            "tool_path": [str(tools_dir)],
            "principal": {"id": "it", "tenant": tenant},
            "model": {"scripted": [{"end_turn": "done", "delay_s": delay_s}]},
        }
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("share", "spare"), [("accept,model", "none"), ("accept", "none"), ("accept", "")]
)
def test_a_tenants_slow_model_turns_do_not_hold_another_tenants_run(
    client: redis.Redis,
    keys: Keys,
    workers: Workers,  # noqa: F811 -- the fixture
    tools_dir: Path,
    toolset: ToolSet,
    workspace: Path,
    signer: Signer,
    share: str,
    spare: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    workers._env.update(
        AGENTLEDGER_TENANT_SHARE=share, AGENTLEDGER_MODEL_THREADS=str(MODEL_THREADS),
        AGENTLEDGER_TENANT_SPARE=spare,
    )  # fmt: skip
    workers.start()
    store = cache_for(RedisEventStore(client, keys))

    def ask(rid: str, tenant: str, delay_s: float) -> None:
        publish(client, keys, RunRequested(
            run_id=rid, request_id=rid, spec=spec(tenant, delay_s, tools_dir),
            base_dir=str(workspace.parent), workspace=str(workspace), queue=QUEUE,
            toolset=toolset.fingerprint,
        ), signer=signer)  # fmt: skip

    a_ids = [f"a-{i}" for i in range(A_RUNS)]
    for rid in a_ids:
        ask(rid, "tenant-a", A_TURN_S)
    holding = MODEL_THREADS - 1 if share == "accept,model" else MODEL_THREADS
    deadline = time.monotonic() + 30
    a_running = 0
    while time.monotonic() < deadline:  # A's turns hold the model pool (the share: all but one)
        states = [store.load(r) for r in a_ids]
        a_running = sum(s is not None and s.model_claim_deadline is not None for s in states)
        if a_running >= holding:
            break
        time.sleep(0.05)
    assert a_running >= holding, f"A's turns took {a_running} threads, not {holding}"
    ask("b-1", "tenant-b", 0.0)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        b = store.load("b-1")
        if b is not None and not b.status.live:
            break
        time.sleep(0.05)
    b = store.load("b-1")
    assert b is not None and b.status is RunStatus.COMPLETED, workers.output()
    took = b.updated_at - b.created_at
    a_states = [store.load(r) for r in a_ids]
    a_live = sum(s is not None and s.status.live for s in a_states)
    a_done = A_RUNS - a_live
    with capsys.disabled():
        print(f"\n[tenants] share={share} spare={spare or '-'}: B's run took {took:.2f}s; "
              f"A's runs done then: {a_done}")  # fmt: skip
    if share == "accept,model" or spare != "none":  # the share, or the default spare slot
        assert took < B_WITHIN_S, "B's run found a model slot while A's turns ran"
        assert a_live > 0, "A's burst was still running"
    else:
        # B took the first thread one of A's first turns gave back (round-robin), not
        # the thread after A's whole backlog (then 9 of A's runs would have ended first)
        assert a_done <= MODEL_THREADS, f"B waited behind {a_done} of A's runs"
