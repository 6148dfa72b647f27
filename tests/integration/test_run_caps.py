"""A tenant's cap of live runs on a task queue, on a real Redis: the line script
played against the pure rule (`agentledger.events.run_caps`) op by op; then
through a real intake and `agentledger workers` with
`AGENTLEDGER_MAX_LIVE_RUNS_PER_TENANT`: tenant A's runs past the cap are created
held, in order, never more than the cap of them live at once (read from their
logs), released first come first, while tenant B's run is not held; a held run
cancelled ends at once and releases nobody; a count a dead process left is put
right from the logs."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import redis
from itkit import QUEUE
from test_tenant_share import spec
from test_worker_sigkill import Workers, workers  # noqa: F401 -- the fixture

from agentledger.events import controls
from agentledger.events.run_caps import Line, admit, finish
from agentledger.events.status import RunStatus
from agentledger.events.types import RunCreated, RunHeld, RunReleased
from agentledger.schemas.inbox import RunRequested
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.metrics.scrape import RedisCollector
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.adapters.run_caps.redis_lines import RedisRunLines
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.bootstrap import build_app
from agentledger.services.handlers.app import App
from agentledger.services.handlers.engine import Decided
from agentledger.services.handlers.state_cache import StateCache, cache_for
from agentledger.services.keys import Keys
from agentledger.services.loops.intake import Intake
from agentledger.services.loops.sweeper import reconcile_lines
from agentledger.services.settings import Settings

CAP = 2


def test_the_line_script_does_what_the_rule_does_op_by_op(client: redis.Redis, keys: Keys) -> None:
    lines = RedisRunLines(client, keys)
    rng = random.Random(37)
    model: dict[str, Line] = {}
    for step in range(600):
        tenant = rng.choice(["acme", "{acme}", "b"])  # braces: the hash tag is a digest
        most = rng.choice([1, 2, 3])
        run = f"r{rng.randrange(12)}"
        line = model.get(tenant, Line())
        if rng.random() < 0.55:
            line, place = admit(line, run, most)
            assert lines.admit(QUEUE, tenant, run, most) == place, step
        else:
            line, released = finish(line, run, most)
            assert lines.finish(QUEUE, tenant, run, most) == list(released), step
        model[tenant] = line
        assert lines.look(QUEUE, tenant) == line, step


def test_one_tenants_line_is_not_anothers_nor_another_queues(
    client: redis.Redis, keys: Keys
) -> None:
    """A tenant named like another tenant's key, or like a queue and tenant joined,
    still has its own line."""
    lines = RedisRunLines(client, keys)
    assert lines.admit("q", "acme", "r1", 1) == 0
    for queue, tenant in (("q", "acme:q"), ("q", "{acme}"), ("q\nacme", "x"), ("q2", "acme")):
        assert lines.admit(queue, tenant, "r2", 1) == 0, (queue, tenant)
    assert lines.look("q", "acme") == Line(frozenset({"r1"}))


def _asker(
    client: redis.Redis, keys: Keys, signer: Signer, tools_dir: Path, toolset: ToolSet, ws: Path
) -> Callable[[str, str, float], None]:
    def ask(rid: str, tenant: str, delay_s: float) -> None:
        publish(client, keys, RunRequested(
            run_id=rid, request_id=rid, spec=spec(tenant, delay_s, tools_dir),
            base_dir=str(ws.parent), workspace=str(ws), queue=QUEUE,
            toolset=toolset.fingerprint,
        ), signer=signer)  # fmt: skip

    return ask


def _wait(
    states: StateCache,
    rids: list[str],
    until: set[RunStatus],
    *,
    within_s: float,
    pool: Workers,
) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = [states.load(r) for r in rids]
        if all(s is not None and s.status in until for s in found):
            return
        time.sleep(0.05)
    raise AssertionError(f"{rids} not {until} within {within_s}s\n{pool.output()}")


def _start_capped(pool: Workers, caps: str) -> None:
    """The fixture's intake stopped; an intake and a workers process with the cap."""
    pool.stop_all()
    pool.procs.clear()
    pool._env.update(AGENTLEDGER_MAX_LIVE_RUNS_PER_TENANT=caps)
    pool.start("intake")
    pool.start()


def _live_spans(store: RedisEventStore, rid: str) -> tuple[float, float, RunHeld | None]:
    """When the run counted (created or released, to its end) and its hold, if any."""
    entries = store.read(rid)
    held = next((e.data for e in entries if isinstance(e.data, RunHeld)), None)
    starts = RunReleased if held is not None else RunCreated
    start = next(e.at for e in entries if isinstance(e.data, starts))
    return start, entries[-1].at, held


@pytest.mark.slow
def test_a_tenants_runs_past_its_cap_are_held_and_released_in_order(
    client: redis.Redis,
    keys: Keys,
    workers: Workers,  # noqa: F811 -- the fixture
    tools_dir: Path,
    toolset: ToolSet,
    workspace: Path,
    signer: Signer,
) -> None:
    _start_capped(workers, f"{QUEUE}={CAP}")
    store = RedisEventStore(client, keys)
    states = cache_for(store)
    ask = _asker(client, keys, signer, tools_dir, toolset, workspace)
    a_ids = [f"a-{i}" for i in range(5)]
    for rid in a_ids:
        ask(rid, "tenant-a", 0.5)
    ask("b-1", "tenant-b", 0.0)
    _wait(states, [*a_ids, "b-1"], {RunStatus.COMPLETED}, within_s=120, pool=workers)
    spans = {rid: _live_spans(store, rid) for rid in [*a_ids, "b-1"]}
    assert spans["b-1"][2] is None, "tenant B's run is not held behind tenant A's"
    assert [spans[r][2] is not None for r in a_ids] == [False, False, True, True, True]
    assert [h.place for r in a_ids if (h := spans[r][2]) is not None] == [1, 2, 3]
    released = [spans[r][0] for r in a_ids[CAP:]]
    assert released == sorted(released), "released first come first"
    moments = sorted(  # an end and a start at one moment: the end first
        [(spans[r][0], 1) for r in a_ids] + [(spans[r][1], -1) for r in a_ids]
    )
    live = most = 0
    for _, change in moments:
        live += change
        most = max(most, live)
    assert most == CAP, "never more than the cap of A's runs live at once, and the cap used"
    assert RedisRunLines(client, keys).look(QUEUE, "tenant-a") == Line(), "the line is empty"


def _capped_intake(
    settings: Settings, client: redis.Redis, keys: Keys, toolset: ToolSet
) -> tuple[Intake, App]:
    app = build_app(replace(settings, max_live_runs_per_tenant=((QUEUE, 1),)), client, toolset)
    directory = Directory(client, keys, member_ttl_s=2.0)
    directory.register(QUEUE, toolset.fingerprint, toolset.manifest())
    membership = Membership(client, keys.intake_members(), app.worker, ttl_s=2.0)
    return Intake(app, client, keys, directory, membership), app


def test_a_held_run_cancelled_releases_nobody_and_a_count_a_dead_process_left_is_put_right(
    settings: Settings,
    client: redis.Redis,
    keys: Keys,
    toolset: ToolSet,
    tools_dir: Path,
    workspace: Path,
    signer: Signer,
) -> None:
    """No workers: the runs are created by an intake in this process and ended by hand."""
    intake, app = _capped_intake(settings, client, keys, toolset)
    lines = RedisRunLines(client, keys)
    ask = _asker(client, keys, signer, tools_dir, toolset, workspace)

    def status(rid: str) -> RunStatus:
        s = app.runs.load(rid)
        assert s is not None, rid
        return s.status

    def cancel(rid: str, on: App) -> None:
        on.engine.take(rid, Decided("test", lambda s: controls.cancel(s, by="carol", source="cli")))

    for rid in ("r1", "r2", "r3"):
        ask(rid, "acme", 0.0)
    while intake.poll_once(block_ms=50):
        pass
    assert [status(r) for r in ("r1", "r2", "r3")] == [
        RunStatus.REQUESTING_MODEL,
        *[RunStatus.HELD] * 2,
    ]
    metrics = RedisCollector(client, keys, lambda: range(keys.shards), [], app.runs.cache.load_many)
    assert metrics.reading().runs["held"] == 2
    cancel("r2", app)  # held: it ends at once, and frees no place it never had
    assert (status("r2"), status("r3")) == (RunStatus.CANCELLED, RunStatus.HELD)
    assert lines.look(QUEUE, "acme") == Line(frozenset({"r1"}), ("r3",))
    cancel("r1", app)  # a live run ends: the first held run takes its place
    assert status("r3") is RunStatus.REQUESTING_MODEL
    assert lines.look(QUEUE, "acme") == Line(frozenset({"r3"}))
    # a process with no line (as one that died before telling it) ends r3: its count stays
    cancel("r3", build_app(settings, client, toolset))
    assert lines.look(QUEUE, "acme") == Line(frozenset({"r3"}))
    ask("r4", "acme", 0.0)  # held behind the stale count, then put right by the intake
    while intake.poll_once(block_ms=50):
        pass
    assert status("r4") is RunStatus.REQUESTING_MODEL
    assert lines.look(QUEUE, "acme") == Line(frozenset({"r4"}))
    held = [e.data for e in app.store.read("r4") if isinstance(e.data, RunHeld | RunReleased)]
    assert [type(e).__name__ for e in held] == ["RunHeld", "RunReleased"]
    # again, and no new run through the intake: the sweeper puts the line right
    cancel("r4", build_app(settings, client, toolset))
    r5 = RunCreated(spec=spec("acme", 0.0, tools_dir), queue=QUEUE, toolset=toolset.fingerprint)
    app.runs.create_many([(r5, "r5", None)], source="test")
    assert status("r5") is RunStatus.HELD
    assert reconcile_lines(app, []) == 0  # not a shard of its
    assert reconcile_lines(app, list(range(keys.shards))) == 1
    assert status("r5") is RunStatus.REQUESTING_MODEL


def test_a_run_id_named_by_another_tenant_never_releases_a_held_run(
    settings: Settings,
    client: redis.Redis,
    keys: Keys,
    toolset: ToolSet,
    tools_dir: Path,
    workspace: Path,
    signer: Signer,
) -> None:
    """Mallory names acme's held run in a request of her own: refused (it exists),
    it lands in her own line only, and putting her line right takes it out without
    releasing acme's run."""
    intake, app = _capped_intake(settings, client, keys, toolset)
    lines = RedisRunLines(client, keys)
    ask = _asker(client, keys, signer, tools_dir, toolset, workspace)
    ask("y1", "acme", 0.0)
    ask("y2", "acme", 0.0)
    while intake.poll_once(block_ms=50):
        pass
    publish(
        client,
        keys,
        RunRequested(
            run_id="y2",
            request_id="m-y2",
            spec=spec("mallory", 0.0, tools_dir),
            base_dir=str(workspace.parent),
            workspace=str(workspace),
            queue=QUEUE,
            toolset=toolset.fingerprint,
        ),
        signer=signer,
    )  # fmt: skip -- acme's held run's id, in a request of mallory's
    while intake.poll_once(block_ms=50):
        pass
    assert "y2" in lines.look(QUEUE, "mallory").live  # it reached her own line only
    ask("m1", "mallory", 0.0)  # held behind it: her intake puts her line right
    while intake.poll_once(block_ms=50):
        pass
    y2, m1 = app.runs.load("y2"), app.runs.load("m1")
    assert y2 is not None and y2.status is RunStatus.HELD
    assert y2.spec.principal.tenant == "acme"
    assert m1 is not None and m1.status is RunStatus.REQUESTING_MODEL
    assert lines.look(QUEUE, "mallory") == Line(frozenset({"m1"}))
    assert lines.look(QUEUE, "acme") == Line(frozenset({"y1"}), ("y2",))
