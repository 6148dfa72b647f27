"""The intake admits a batch at a time, against a real Redis: one poll reads the
entries of every publisher's streams and ends each on its own. A publisher's
bad entries in a batch (forged, replayed, refused, broken, failing in Redis)
are rejected alone with their reasons and never delay or reject another
publisher's good ones; a request followed by a control of its run in the same
batch finds its run; the same request twice in a batch makes one run; each
distinct spec is checked once. An intake killed mid-batch (after the request
claims, between the appends, before the acks) loses and duplicates nothing:
another takes its entries over and each run exists once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
from itkit import QUEUE, scripted_spec
from test_intake_on_redis import pending, rejected, request
from test_intake_streams import signer_of

from agentledger.events.status import RunStatus
from agentledger.schemas.inbox import RunCancelRequested, RunRequested
from agentledger.schemas.signature import entry as signed_entry
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.inbox.publishing import publish, stamped
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.adapters.store.port import Append
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.bootstrap import build_app
from agentledger.services.handlers.app import App
from agentledger.services.keys import Keys
from agentledger.services.loops import intake_requests
from agentledger.services.loops.intake import READ_COUNT, Intake
from agentledger.services.settings import Settings


class Killed(BaseException):
    """The intake process dies here (nothing after it runs)."""


def raw(app: App, tools_dir: Path, workspace: Path, run_id: str, **spec: Any) -> bytes:
    """A stamped request's message bytes (a spec changed by `spec`)."""
    asked = request(
        app, run_id, scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir), workspace
    )
    data = json.loads(stamped(asked).model_dump_json())
    data["spec"].update(spec)
    return json.dumps(data).encode()


def put(client: redis.Redis, keys: Keys, stream_of: str, fields: dict[str, Any]) -> None:
    client.xadd(keys.inbox(0, stream_of), fields)  # one partition: one stream, one read


def reasons(client: redis.Redis, keys: Keys) -> dict[str, str]:
    """Each rejected entry's reason, by the run id its message names (or its entry id)."""
    out = {}
    for f in rejected(client, keys):
        text = f.get(b"field:message", b"").decode(errors="replace")
        try:
            named = json.loads(text).get("run_id")
        except (ValueError, AttributeError):
            named = None
        out[named or f[b"entry_id"].decode()] = f[b"reason"].decode()
    return out


def test_one_publishers_bad_entries_never_delay_or_reject_anothers_good_ones(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings,
    signer: Signer, tools_dir: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    mallory = signer_of(settings, "mallory", principals=("it@it-tenant",))
    assert intake.poll_once(block_ms=10) == 0  # it owns the partitions, reads both publishers
    m = mallory.name

    def sign(message: bytes, *, key: str = mallory.key) -> dict[str, Any]:
        return signed_entry(m, key, message)  # type: ignore[return-value]

    def spec_for(task: str) -> dict[str, Any]:
        return {"task": task, "principal": {"id": "root", "tenant": "it-tenant"}}

    replayed = sign(raw(app, tools_dir, workspace, "run-m-once"))
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("run-m-forged", sign(raw(app, tools_dir, workspace, "run-m-forged"), key="1" * 64),
         "signature"),
        ("run-m-invalid", sign(raw(app, tools_dir, workspace, "run-m-invalid",
                                   budgets={"max_turns": 0})), "spec.budgets.max_turns"),
        ("run-m-tools", sign(raw(app, tools_dir, workspace, "run-m-tools", tools=["os"])),
         "unknown tool set"),
        ("run-m-once", replayed, ""),  # accepted the first time
        ("run-m-once-again", replayed, "replayed"),  # the same bytes again: its nonce seen
        ("run-m-principal", sign(raw(app, tools_dir, workspace, "run-m-principal",
                                     **spec_for("not mine"))), "principal"),
        ("run-m-internal", sign(raw(app, tools_dir, workspace, "run-m-internal")),
         "internal error: RuntimeError: boom"),
        ("run-m-wrongtype", sign(raw(app, tools_dir, workspace, "run-m-wrongtype")),
         "WRONGTYPE"),
        ("garbage", {"message": b"\xff{", "publisher": m}, "signature"),
    ]  # fmt: skip
    for _, fields, _ in bad:
        put(client, keys, m, fields)
    # signed by mallory, written into the good publisher's stream, among its entries
    put(client, keys, signer.name, sign(raw(app, tools_dir, workspace, "run-m-stream")))
    client.set(keys.run("run-m-wrongtype"), "squatted")  # its append fails in Redis: WRONGTYPE
    good = [f"run-g{i}" for i in range(6)]
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    for run_id in good:
        publish(client, keys, request(app, run_id, spec, workspace), signer=signer)
    real = intake.requests.prepare

    def buggy(message: RunRequested, *args: Any, **kw: Any) -> Any:
        if message.run_id == "run-m-internal":
            raise RuntimeError("boom")  # a bug met by one entry only
        return real(message, *args, **kw)

    monkeypatch.setattr(intake.requests, "prepare", buggy)
    total = len(bad) + 1 + len(good)
    assert total <= READ_COUNT

    assert intake.poll_once(block_ms=100) == total  # one batch: every entry, at once

    for run_id in good:
        state = app.runs.load(run_id)
        assert (
            state is not None
            and state.status is RunStatus.REQUESTING_MODEL
            and state.publisher == signer.name
        )
    assert app.runs.load("run-m-once") is not None  # mallory's own good request, too
    said = reasons(client, keys)
    assert not set(said) & set(good)
    for run_id, _, reason in bad:
        named = {"run-m-once-again": "run-m-once", "garbage": None}.get(run_id, run_id)
        if named is not None and reason:  # the replayed entry names the run of its original
            assert reason in said[named], run_id
    [garbage] = [why for where, why in said.items() if where.startswith("0/mallory/")]
    assert garbage == "unsigned: the entry has no 'signature' field"
    assert "wrong stream: signed by 'mallory'" in said["run-m-stream"]
    assert len(rejected(client, keys)) == len(bad)  # each bad one once; no good one
    assert pending(client, keys, (signer.name, m)) == 0  # every entry acked and deleted


def test_a_control_after_its_runs_request_in_one_batch_finds_the_run(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, signer: Signer,
    tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    assert intake.poll_once(block_ms=10) == 0
    publish(client, keys, request(app, "run-c", spec, workspace), signer=signer)
    publish(client, keys, RunCancelRequested(run_id="run-c", by="ops", reason="no"), signer=signer)
    publish(client, keys, request(app, "run-d", spec, workspace), signer=signer)

    assert intake.poll_once(block_ms=100) == 3

    assert rejected(client, keys) == []
    cancelled = app.runs.load("run-c")
    assert cancelled is not None
    assert cancelled.status in (RunStatus.CANCELLING, RunStatus.CANCELLED)
    assert app.runs.load("run-d").status is RunStatus.REQUESTING_MODEL  # type: ignore[union-attr]


def test_the_same_request_twice_in_a_batch_makes_one_run_and_each_spec_is_checked_once(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, signer: Signer,
    tools_dir: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    checked: list[str] = []
    real = intake_requests.check_spec

    def counted(spec: Any, *args: Any, **kw: Any) -> None:
        checked.append(spec.task)
        real(spec, *args, **kw)

    monkeypatch.setattr(intake_requests, "check_spec", counted)
    one = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    other = one.model_copy(update={"task": "another task"})
    assert intake.poll_once(block_ms=10) == 0
    for i in range(6):
        publish(client, keys, request(app, f"run-{i}", one if i % 2 else other, workspace),
                signer=signer)  # fmt: skip
    twice = request(app, "run-twice", one, workspace)
    publish(client, keys, twice, signer=signer)
    publish(client, keys, twice, signer=signer)  # sent again (stamped anew)

    assert intake.poll_once(block_ms=100) == 8

    assert rejected(client, keys) == []
    assert sorted(checked) == ["another task", "integration test run"]  # once each
    assert client.xlen(keys.run("run-twice")) == 1


def _second_intake(
    settings: Settings, client: redis.Redis, keys: Keys, toolset: ToolSet
) -> tuple[App, Intake]:
    """Another intake process (its own app, caches and consumer name)."""
    app = build_app(settings, client, toolset, worker="second-intake")
    directory = Directory(client, keys, member_ttl_s=2.0)
    membership = Membership(client, keys.intake_members(), app.worker, ttl_s=2.0)
    return app, Intake(app, client, keys, directory, membership)


KILLS = ["after the request claims", "between the appends", "before the acks"]


@pytest.mark.parametrize("at", KILLS)
def test_an_intake_killed_mid_batch_loses_and_duplicates_nothing(
    at: str, app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings,
    signer: Signer, toolset: ToolSet, tools_dir: Path, workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    runs = [f"run-k{i}" for i in range(8)]
    assert intake.poll_once(block_ms=10) == 0
    for run_id in runs:
        publish(client, keys, request(app, run_id, spec, workspace), signer=signer)
    store = app.runs.store
    real_append_many = store.append_many

    def half_then_die(appends: Sequence[Append]) -> list[int | Exception]:
        real_append_many(appends[: len(appends) // 2])
        raise Killed

    def die(*args: Any, **kw: Any) -> Any:
        raise Killed

    if at == "after the request claims":
        monkeypatch.setattr(app.runs, "create_many", die)
    elif at == "between the appends":
        monkeypatch.setattr(store, "append_many", half_then_die)
    else:
        monkeypatch.setattr(intake, "_finish", die)
    with pytest.raises(Killed):
        intake.poll_once(block_ms=100)
    landed = [r for r in runs if client.exists(keys.run(r))]
    assert len(landed) == {KILLS[0]: 0, KILLS[1]: 4, KILLS[2]: 8}[at]
    first_ids = {r: client.xrange(keys.run(r))[0][1][b"id"] for r in landed}
    monkeypatch.undo()
    intake._membership.leave()  # its membership lapses: the partitions pass to the next

    app2, second = _second_intake(settings, client, keys, toolset)
    assert second.poll_once(block_ms=10) == 0  # new entries only: the dead one's wait
    assert second.reclaim_once(min_idle_ms=0) == len(runs)

    assert rejected(client, keys) == []  # the redelivery is not a replay of itself
    assert pending(client, keys) == 0
    for run_id in runs:
        assert client.xlen(keys.run(run_id)) == 1, run_id  # one RunCreated: none lost, none twice
        state = app2.runs.load(run_id)
        assert state is not None and state.status is RunStatus.REQUESTING_MODEL
    for run_id, first in first_ids.items():  # what had landed is kept as it was
        assert client.xrange(keys.run(run_id))[0][1][b"id"] == first
    indexed = sum(client.zcard(keys.runs(s)) for s in range(keys.shards))
    assert indexed == len(runs)
    streams = client.scan_iter(match=f"{keys.prefix}:*:q:{QUEUE}:*", _type="stream")
    queued = sum(client.xlen(s) for s in streams if not s.endswith((b":delayed", b":dead")))
    assert queued == len(runs)  # each run's first command queued once, with its RunCreated
