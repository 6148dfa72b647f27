"""The intake, on a real Redis, takes a publisher's backlog by tenant: tenant A's 200
requests then tenant B's one, all through one publisher's stream, are read in one
window (a full read is followed by reads without blocking) and handled in chunks
round-robin by publisher and tenant, so B's run is in the first chunk created, not
after A's 200."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from itkit import QUEUE
from test_tenant_share import spec

from agentledger.schemas.inbox import RunRequested
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.handlers.state_cache import cache_for
from agentledger.services.keys import Keys
from agentledger.services.loops.intake import CHUNK, Intake
from agentledger.services.loops.intake_requests import Prepared

A_RUNS = 200  # over READ_COUNT a partition stream: a read alone would not reach B


def test_a_tenants_request_behind_anothers_backlog_in_one_stream_is_created_first(
    client: redis.Redis, keys: Keys, intake: Intake, signer: Signer, tools_dir: Path,
    toolset: ToolSet, workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    assert intake.poll_once(block_ms=10) == 0  # it owns the partitions
    created: list[list[str]] = []
    real = intake.requests.create

    def spy(batch: list[Prepared]) -> list[str | Exception]:
        created.append([p.message.run_id for p in batch])
        return real(batch)

    monkeypatch.setattr(intake.requests, "create", spy)

    def ask(rid: str, tenant: str) -> None:
        publish(client, keys, RunRequested(
            run_id=rid, request_id=rid, spec=spec(tenant, 0.0, tools_dir),
            base_dir=str(workspace.parent), workspace=str(workspace), queue=QUEUE,
            toolset=toolset.fingerprint,
        ), signer=signer)  # fmt: skip

    a_ids = [f"a-{i}" for i in range(A_RUNS)]
    for rid in a_ids:
        ask(rid, "tenant-a")
    ask("b-1", "tenant-b")

    handled = intake.poll_once(block_ms=100)

    assert handled == A_RUNS + 1, "the backlog was read in one window"
    assert "b-1" in created[0], "B's run in the first chunk created"
    assert all(len(c) <= CHUNK for c in created)
    order = [r for c in created for r in c]
    assert sorted(order) == sorted([*a_ids, "b-1"]), "each created once"
    store = cache_for(RedisEventStore(client, keys))
    assert all(store.load(r) is not None for r in [*a_ids, "b-1"])


def test_a_request_that_comes_in_while_a_window_is_handled_waits_one_chunk(
    client: redis.Redis, keys: Keys, intake: Intake, signer: Signer, tools_dir: Path,
    toolset: ToolSet, workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """B's request reaches Redis after the intake read A's window: it is read between
    two chunks and handled in the next one, not after the rest of A's window."""
    assert intake.poll_once(block_ms=10) == 0  # it owns the partitions

    def ask(rid: str, tenant: str) -> None:
        publish(client, keys, RunRequested(
            run_id=rid, request_id=rid, spec=spec(tenant, 0.0, tools_dir),
            base_dir=str(workspace.parent), workspace=str(workspace), queue=QUEUE,
            toolset=toolset.fingerprint,
        ), signer=signer)  # fmt: skip

    created: list[list[str]] = []
    real = intake.requests.create

    def spy(batch: list[Prepared]) -> list[str | Exception]:
        created.append([p.message.run_id for p in batch])
        if len(created) == 1:
            ask("b-1", "tenant-b")  # arrives while the window is being handled
        return real(batch)

    monkeypatch.setattr(intake.requests, "create", spy)
    a_ids = [f"a-{i}" for i in range(A_RUNS)]
    for rid in a_ids:
        ask(rid, "tenant-a")

    handled = intake.poll_once(block_ms=100)

    assert handled == A_RUNS + 1
    assert "b-1" not in created[0] and "b-1" in created[1], "B's run in the next chunk"
    assert all(len(c) <= CHUNK for c in created)
    order = [r for c in created for r in c]
    assert sorted(order) == sorted([*a_ids, "b-1"]), "each created once"
    assert order[: len(created[0])] == a_ids[: len(created[0])], "A's in arrival order"
