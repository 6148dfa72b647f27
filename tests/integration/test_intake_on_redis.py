"""The intake against a real Redis: a malformed or unservable inbox entry is moved
to the rejected stream with a reason naming what is wrong and every original
field, it is acknowledged and deleted, and the intake goes on to accept the good
entries after it. A request id always names the same run. The intake never
imports a module a message names: it binds a run to a tool set some worker
registered. An entry a dead intake held is handled by another; one that keeps
killing intakes is rejected as poison, not retried forever."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from itkit import PUBLISHER, QUEUE, scripted_spec, signed

from agentledger.events.status import RunStatus
from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.json_limits import MAX_MESSAGE_BYTES
from agentledger.schemas.publishers import GrantedPrincipal, Publisher
from agentledger.services.adapters.inbox.publishing import GROUP, publish, stamped
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.handlers.app import App
from agentledger.services.keys import Keys
from agentledger.services.loops import rejections
from agentledger.services.loops.inbox_auth import Granted
from agentledger.services.loops.intake import Intake

TTL_S = 2.0


def request(app: App, run_id: str, spec: Any, workspace: Path, **more: Any) -> RunRequested:
    return RunRequested(
        run_id=run_id, request_id=run_id, spec=spec, base_dir=str(workspace.parent),
        workspace=str(workspace), queue=QUEUE, **more,
    )  # fmt: skip


def good(app: App, tools_dir: Path, workspace: Path, run_id: str) -> dict[str, Any]:
    """A request as `publish` signs it (stamped: issued now, a nonce of its own)."""
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    return json.loads(stamped(request(app, run_id, spec, workspace)).model_dump_json())


def with_spec(message: dict[str, Any], **changes: Any) -> dict[str, str]:
    return {"message": json.dumps({**message, "spec": {**message["spec"], **changes}})}


def everything(name: str = PUBLISHER) -> Granted:
    """A publisher granted every principal, scope, queue and workspace (for direct calls)."""
    return Granted(
        name,
        Publisher(
            key="0" * 64,
            principals=(GrantedPrincipal(id="*", tenant="*"),),
            scopes=("*",),
            queues=("*",),
            workspaces=("/",),
        ),
    )


def bad_entries(good: dict[str, Any]) -> dict[str, tuple[dict[str, Any], list[str]]]:
    """Malformed entries by name: (the entry's fields, what its reason must name)."""
    nested = "[" * 100_000 + "]" * 100_000
    return {
        "not JSON": ({"message": "{'spec': nope"}, ["not JSON"]),
        "nested too deep": ({"message": nested}, ["nested 100000 deep", "limit is 64"]),
        "too big": ({"message": "x" * (MAX_MESSAGE_BYTES + 1)}, ["the limit is 8,388,608"]),
        "not UTF-8": ({"message": b"\xff\xfe{}"}, ["not UTF-8"]),
        "not an object": ({"message": "[1, 2]"}, ["a JSON list, not an object"]),
        "an unknown type": ({"message": '{"type": "DropTables"}'}, ["unknown message type"]),
        "a spec field out of range": (
            with_spec(good, budgets={"max_turns": 0}),
            ["spec.budgets.max_turns", "greater than or equal to 1"],
        ),
        "an unknown spec field": (with_spec(good, tols=["x"]), ["spec.tols", "Extra inputs"]),
        "no message field": ({"body": json.dumps(good)}, ["no 'message' field"]),
        "modules no worker serves": (
            with_spec(good, tools=["os"]),
            ["unknown tool set", "no worker has served queue 'it' with modules ['os']"],
        ),
    }


def rejected(client: redis.Redis, keys: Keys) -> list[dict[bytes, bytes]]:
    return [f for p in range(keys.inbox_partitions) for _, f in client.xrange(keys.rejected(p))]


def pending(client: redis.Redis, keys: Keys, publishers: tuple[str, ...] = (PUBLISHER,)) -> int:
    """Entries still in the inbox streams of these publishers (read or not)."""
    total = 0
    for p in range(keys.inbox_partitions):
        for name in publishers:
            stream = keys.inbox(p, name)
            grouped = client.exists(stream) and any(
                g["name"] == GROUP.encode() for g in client.xinfo_groups(stream)
            )
            total += client.xlen(stream) + (
                client.xpending(stream, GROUP)["pending"] if grouped else 0
            )
    return total


def poll_until(intake: Intake, n: int) -> None:
    handled = 0
    for _ in range(40):
        handled += intake.poll_once(block_ms=100)
        if handled >= n:
            return
    raise AssertionError(f"the intake handled {handled} of {n} entries")


@pytest.mark.parametrize(
    "kind",
    ["not JSON", "nested too deep", "too big", "not UTF-8", "not an object", "an unknown type",
     "a spec field out of range", "an unknown spec field", "no message field",
     "modules no worker serves"],
)  # fmt: skip
def test_a_malformed_entry_is_rejected_with_its_reason_and_the_next_good_one_accepted(
    kind: str, app: App, client: redis.Redis, keys: Keys, intake: Intake, tools_dir: Path,
    workspace: Path, signer: Signer,
) -> None:  # fmt: skip
    fields, reason_names = bad_entries(good(app, tools_dir, workspace, "run-bad"))[kind]
    bad_id = client.xadd(keys.inbox(0, signer.name), signed(fields, signer))
    good_fields = {"message": json.dumps(good(app, tools_dir, workspace, "run-good"))}
    client.xadd(keys.inbox(0, signer.name), signed(good_fields, signer))

    poll_until(intake, 2)

    [moved] = rejected(client, keys)
    reason = moved[b"reason"].decode()
    assert all(name in reason for name in reason_names), reason
    assert moved[b"entry_id"] == f"0/{signer.name}/{bad_id.decode()}".encode()
    assert moved[b"publisher"] == signer.name.encode()  # the stream's: who really wrote it
    original = {
        k.encode(): v if isinstance(v, bytes) else v.encode()
        for k, v in signed(fields, signer).items()
    }
    expected = rejections.digest(moved[b"entry_id"].decode(), signer.name, reason, original)
    assert moved == {k.encode(): v for k, v in expected.items()}
    assert sum(len(k) + len(v) for k, v in moved.items()) <= rejections.MAX_BYTES
    for k, v in original.items():  # kept whole, or its start with its size and sha256
        kept = moved[b"field:" + k]
        assert kept == v or (v.startswith(kept) and moved[b"size:" + k] == str(len(v)).encode())
    assert app.runs.load("run-bad") is None
    good_run = app.runs.load("run-good")
    assert good_run is not None and good_run.status is RunStatus.REQUESTING_MODEL
    assert (good_run.queue, good_run.toolset) == (QUEUE, app.toolset.fingerprint)
    assert pending(client, keys) == 0, "every entry acked and gone from the inbox"


def test_the_same_request_again_is_a_no_op_and_another_under_its_id_is_rejected(
    app: App,
    client: redis.Redis,
    keys: Keys,
    intake: Intake,
    tools_dir: Path,
    workspace: Path,
    signer: Signer,
) -> None:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    first = request(app, "run-1", spec, workspace)
    publish(client, keys, first, signer=signer)
    publish(client, keys, first, signer=signer)
    other = spec.model_copy(update={"task": "something else"})
    publish(
        client, keys, first.model_copy(update={"spec": other, "run_id": "run-2"}), signer=signer
    )

    poll_until(intake, 3)

    [moved] = rejected(client, keys)
    assert (
        moved[b"reason"]
        .decode()
        .startswith("replayed: request_id 'run-1' names run 'run-1' already")
    )
    assert [e.type for e in app.store.read("run-1")] == ["RunCreated"]
    assert app.runs.load("run-2") is None


def test_a_request_that_names_no_tool_set_is_bound_to_the_one_its_queue_serves(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    run_id = intake.accept(request(app, "run-b", spec, workspace), everything())
    assert app.runs.load(run_id).toolset == app.toolset.fingerprint  # type: ignore[union-attr]


def test_an_entry_taken_by_an_intake_that_died_is_handled_by_another(
    app: App,
    client: redis.Redis,
    keys: Keys,
    intake: Intake,
    tools_dir: Path,
    workspace: Path,
    signer: Signer,
) -> None:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    entry = publish(client, keys, request(app, "run-orphan", spec, workspace), signer=signer)
    part = int(entry.split("/")[0])
    # another intake (its group made) read it and died before acknowledging it
    client.xgroup_create(keys.inbox(part, signer.name), GROUP, id="0")
    client.xreadgroup(GROUP, "dead-intake", {keys.inbox(part, signer.name): ">"}, count=10)
    assert intake.poll_once(block_ms=10) == 0  # new entries only: it is not seen again

    assert intake.reclaim_once(min_idle_ms=0) == 1

    assert app.runs.load("run-orphan") is not None
    assert pending(client, keys) == 0


def test_an_entry_that_keeps_killing_intakes_is_rejected_as_poison(
    app: App,
    client: redis.Redis,
    keys: Keys,
    intake: Intake,
    tools_dir: Path,
    workspace: Path,
    signer: Signer,
) -> None:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    entry = publish(client, keys, request(app, "run-p", spec, workspace), signer=signer)
    part = int(entry.split("/")[0])
    client.xgroup_create(keys.inbox(part, signer.name), GROUP, id="0")
    client.xreadgroup(GROUP, "dead-1", {keys.inbox(part, signer.name): ">"}, count=10)
    for dead in ("dead-2", "dead-3"):  # each takes it over, and dies too
        client.xautoclaim(keys.inbox(part, signer.name), GROUP, dead, 0, "0-0")
    assert intake.poll_once(block_ms=10) == 0  # nothing new; it learns what it owns

    assert intake.reclaim_once(min_idle_ms=0) == 1

    [moved] = rejected(client, keys)
    assert moved[b"reason"].decode().startswith("poison: delivered 4 times")
    assert app.runs.load("run-p") is None
    assert pending(client, keys) == 0
