"""No step lost to a blip or a kill, on real redis-servers: a write's outcome in
its executor's hands is recorded after Redis comes back (never an unknown
outcome), a late outcome after its claim was declared unknown resolves it and
takes the run out of awaiting_human, and a run whose acceptance worker died is
re-driven after the normal lease, not the acceptance time limit."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from itkit import (
    OffsetClock,
    ReplyLostStore,
    call,
    capturing,
    claim_without_running,
    create_run,
    drive,
    event_types,
    executions,
    load,
    proposed,
    scripted_spec,
    with_store,
)

from agentledger.events.acceptance_step import FILE_CHECK_S
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.tool_step import Succeeded, record_outcome
from agentledger.events.types import AcceptanceStarted, RunEscalated, RunResumed, ToolCallSucceeded
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.adapters.redis.local_server import PrivateRedis, free_port, start_server
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.bootstrap import build_app
from agentledger.services.handlers.app import App
from agentledger.services.handlers.carry import handle_run_acceptance
from agentledger.services.handlers.engine import Decided
from agentledger.services.keys import keys_for
from agentledger.services.loops.sweeper import run_sweeper, sweep_once
from agentledger.services.settings import Settings

OUTAGE_S = 2.0
LONG_OUTAGE_S = 3.5  # longer than a claim's 0.5 s timeout and 1.5 s grace


@pytest.fixture
def private(tmp_path: Path) -> Iterator[PrivateRedis]:
    # `always`: a redis-server killed under `everysec` can lose events it acknowledged
    # (it holds its AOF write back while a slow fsync runs); the test is about the outage
    server = start_server(tmp_path / "redis", port=free_port(), fsync="always")
    yield server
    server.stop()


def wait_for(what: str, check: object, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def outage_once_the_write_runs(
    private: PrivateRedis, ws: Path, seconds: float, down: list[float]
) -> threading.Thread:
    """A started thread: Redis is SIGKILLed once call `w` runs, and started again on
    its port and data `seconds` later (`down` gets the time it went)."""
    port = int(private.url.rsplit(":", 1)[1].split("/")[0])

    def outage() -> None:
        wait_for("the write to start", lambda: executions(ws).get("w") == 1)
        private.process.kill()
        private.process.wait()
        down.append(time.monotonic())
        time.sleep(seconds)
        restarted = start_server(private.data_dir, port=port, fsync="always")
        private.process = restarted.process

    killer = threading.Thread(target=outage)
    killer.start()
    return killer


def test_a_write_whose_outcome_arrives_during_a_redis_outage_is_recorded_once_redis_is_back(
    private: PrivateRedis, tmp_path: Path, tools_dir: Path, toolset: ToolSet
) -> None:
    client = redis_client(private.url)
    app = build_app(Settings(redis_url=private.url, prefix="t-outage"), client, toolset)
    ws = tmp_path / "ws"
    ws.mkdir()
    spec = scripted_spec(
        [
            {"tool_use": [call("w", "it_write", key="k", value="1", delay_s=0.3)]},
            {"end_turn": "ok"},
        ],
        tools_dir=tools_dir,
    )
    run_id = create_run(app, client, "run-outage", spec, ws)
    down: list[float] = []
    killer = outage_once_the_write_runs(private, ws, OUTAGE_S, down)
    try:
        final = drive(app, run_id)
    finally:
        killer.join()  # Redis is back (and the fixture stops the restarted server)
    events = app.store.read(run_id)

    assert down, "Redis was never taken down"
    assert final.status is RunStatus.COMPLETED, final.detail
    assert executions(ws) == {"w": 1}
    succeeded = [e.data for e in events if isinstance(e.data, ToolCallSucceeded)]
    assert [(s.call_id, s.resolved_by) for s in succeeded] == [("w", None)]
    assert "ToolCallOutcomeUnknown" not in event_types(app.store, run_id)
    client.close()


def test_a_claim_that_landed_while_its_reply_was_lost_is_run_by_its_worker(
    private: PrivateRedis, tmp_path: Path, tools_dir: Path, toolset: ToolSet
) -> None:
    """Redis applied the claim's append and went down before replying: the worker
    that sent it holds the only knowledge that the write has not run. It sends the
    append again (recognised as landed) and runs the write, instead of leaving a
    claim nobody runs to expire into an unknown outcome."""
    client = redis_client(private.url)
    app = build_app(Settings(redis_url=private.url, prefix="t-claim-lost"), client, toolset)
    lossy = ReplyLostStore(app.store, "ToolCallStarted")
    app = with_store(app, lossy)
    ws = tmp_path / "ws"
    ws.mkdir()
    spec = scripted_spec(
        [{"tool_use": [call("w", "it_write", key="k", value="1")]}, {"end_turn": "ok"}],
        tools_dir=tools_dir,
    )
    run_id = create_run(app, client, "run-claim-lost", spec, ws)

    final = drive(app, run_id)

    assert lossy.lost, "no claim's reply was lost"
    assert final.status is RunStatus.COMPLETED, final.detail
    assert executions(ws) == {"w": 1}
    types = event_types(app.store, run_id)
    assert types.count("ToolCallStarted") == 1
    assert "ToolCallOutcomeUnknown" not in types
    client.close()


def test_a_claim_that_runs_out_within_an_outage_waits_for_the_outcome_in_hand(
    private: PrivateRedis, tmp_path: Path, tools_dir: Path, toolset: ToolSet
) -> None:
    """The write's claim (0.5 s timeout + 1.5 s grace) runs out while Redis is down
    (3.5 s); the sweeper, passing every 0.05 s, sees Redis back before the worker's
    next try (its pause grows to 1 s). The time Redis was out of reach is not
    counted against the claim: the claim has the rest of its 2 s after Redis is
    back, and the outcome in hand lands, not an unknown outcome."""
    client = redis_client(private.url)
    settings = Settings(redis_url=private.url, prefix="t-outage-sweep", sweep_interval_s=0.05)
    app = build_app(settings, client, toolset)
    ws = tmp_path / "ws"
    ws.mkdir()
    spec = scripted_spec(
        [
            {"tool_use": [call("w", "it_write_soon", key="k", value="1", delay_s=0.3)]},
            {"end_turn": "ok"},
        ],
        tools_dir=tools_dir,
    )
    spec = spec.model_copy(
        update={"policies": spec.policies.model_copy(update={"claim_grace_s": 1.5})}
    )
    run_id = create_run(app, client, "run-outage-sweep", spec, ws)
    stop = threading.Event()
    sweeps = Membership(client, keys_for(settings).members("sweep"), "host:1:sweeper", ttl_s=5.0)

    def sweeping() -> None:  # as the worker's supervisor runs it: started again if it raises
        while not stop.is_set():
            try:
                run_sweeper(app, sweeps, range(settings.shards), stop)
            except redis.ConnectionError:
                stop.wait(0.05)

    sweeper = threading.Thread(target=sweeping, daemon=True)
    sweeper.start()
    down: list[float] = []
    killer = outage_once_the_write_runs(private, ws, LONG_OUTAGE_S, down)  # the deadline passes
    try:
        final = drive(app, run_id)
    finally:
        killer.join()
        stop.set()
        sweeper.join(timeout=10)
    events = app.store.read(run_id)

    assert down, "Redis was never taken down"
    assert final.status is RunStatus.COMPLETED, final.detail
    assert "ToolCallOutcomeUnknown" not in event_types(app.store, run_id)
    succeeded = [e.data for e in events if isinstance(e.data, ToolCallSucceeded)]
    assert [(s.call_id, s.resolved_by) for s in succeeded] == [("w", None)]
    client.close()


def test_a_late_outcome_resolves_the_unknown_and_the_run_leaves_awaiting_human(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec(
        [{"tool_use": [call("w", "it_write", key="k", value="1")]}, {"end_turn": "ok"}],
        tools_dir=tools_dir,
    )
    run_id = create_run(app, client, "run-late", spec, workspace)
    drive(app, run_id, until=proposed)
    claimed = claim_without_running(app, run_id, "w", worker="slow:1")
    later, _ = capturing(app, OffsetClock(60))
    sweep_once(later, list(range(app.settings.shards)))  # its claim ran out: nobody can tell
    assert load(app, run_id).status is RunStatus.AWAITING_HUMAN

    outcome = Succeeded(output={"key": "k", "written": "1"})
    app.engine.take(
        run_id,
        Decided(
            "tools",
            lambda s: record_outcome(
                s, "w", attempt=claimed.call("w").attempts, outcome=outcome,
                started_at=claimed.updated_at, finished_at=app.clock.now(),
            ),
        ),
    )  # fmt: skip

    state = load(app, run_id)
    late = [e.data for e in app.store.read(run_id) if isinstance(e.data, ToolCallSucceeded)]
    assert [s.resolved_by for s in late] == ["late_outcome"]
    assert any(isinstance(e.data, RunResumed) for e in app.store.read(run_id))
    assert state.call("w").status is CallStatus.SUCCEEDED
    assert state.status is RunStatus.REQUESTING_MODEL
    assert drive(app, run_id).status is RunStatus.COMPLETED


class WorkerDied(Exception):
    """Stands for a SIGKILL in the middle of the acceptance checks."""


def test_a_run_whose_acceptance_worker_died_is_re_driven_after_the_normal_lease(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    (workspace / "out.txt").write_text("done")
    spec = scripted_spec(
        [{"end_turn": "done"}], tools_dir=tools_dir,
        acceptance=[{"file": "out.txt", "contains": "done"}],
    )  # fmt: skip
    run_id = create_run(app, client, "run-accept", spec, workspace)
    drive(app, run_id, until=lambda s: s.status is RunStatus.ACCEPTING)

    def dies(*_: object) -> None:
        raise WorkerDied

    monkeypatch.setattr("agentledger.services.handlers.accept.run_check", dies)
    with pytest.raises(WorkerDied):
        handle_run_acceptance(app, run_id)
    monkeypatch.undo()
    started = [e for e in app.store.read(run_id) if isinstance(e.data, AcceptanceStarted)]
    assert len(started) == 1
    claim = started[0].data.deadline_at - started[0].at
    # the lease and the time its one file check may take, not the acceptance time limit
    assert claim <= app.settings.lease_s + FILE_CHECK_S + 0.5
    assert app.settings.acceptance_lease_s > 10 * claim

    soon, _ = capturing(app, OffsetClock(claim + 0.1))
    assert sweep_once(soon, list(range(app.settings.shards))) == 1
    final = drive(soon, run_id)
    assert final.status is RunStatus.COMPLETED, final.detail
    assert [
        e.data.attempt for e in app.store.read(run_id) if isinstance(e.data, AcceptanceStarted)
    ] == [1, 2]
    assert not any(isinstance(e.data, RunEscalated) for e in app.store.read(run_id))
