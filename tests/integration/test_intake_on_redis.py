"""The intake against a real Redis: a malformed inbox entry is moved to the
rejected stream with a reason naming what is wrong and every original field,
it is acknowledged, and the intake goes on to accept the good entries after it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
from itkit import request, scripted_spec

from events.status import RunStatus
from services.handlers.app import App
from services.handlers.steps import load
from services.keys import Keys
from services.loops.intake import GROUP, Intake, publish


def good_request(tools_dir: Path, workspace: Path, run_id: str) -> dict[str, Any]:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    return json.loads(request(run_id, spec, workspace).model_dump_json())


def with_spec(message: dict[str, Any], **changes: Any) -> dict[str, str]:
    spec = {**message["spec"], **changes}
    return {"message": json.dumps({**message, "spec": spec})}


def bad_entries(
    tools_dir: Path, workspace: Path, elsewhere: Path
) -> dict[str, tuple[dict[str, Any], list[str]]]:
    """Malformed entries by name: (the entry's fields, what its reason must name)."""
    good = good_request(tools_dir, workspace, "run-bad")
    (elsewhere / "it_broken_tools.py").write_text("raise RuntimeError('exploded on import')\n")
    return {
        "not JSON": ({"message": "{'spec': nope"}, ["not JSON"]),
        "a spec field out of range": (
            with_spec(good, budgets={"max_turns": 0}),
            ["spec.budgets.max_turns", "greater than or equal to 1"],
        ),
        "an unknown spec field": (with_spec(good, tols=["x"]), ["spec.tols", "Extra inputs"]),
        "no message field": ({"body": json.dumps(good)}, ["no 'message' field"]),
        "a tool module that is not there": (
            with_spec(good, tools=["it_no_such_module"]),
            ["tools.0", "cannot import 'it_no_such_module'", "ModuleNotFoundError"],
        ),
        "a tool module that fails to import": (
            with_spec(good, tools=["it_broken_tools"], tool_path=[str(elsewhere)]),
            ["tools.0", "RuntimeError", "exploded on import"],
        ),
    }


KINDS = [
    "not JSON",
    "a spec field out of range",
    "an unknown spec field",
    "no message field",
    "a tool module that is not there",
    "a tool module that fails to import",
]


def poll_until(intake: Intake, n: int) -> None:
    handled = 0
    for _ in range(20):
        handled += intake.poll_once(block_ms=100)
        if handled >= n:
            return
    raise AssertionError(f"the intake handled {handled} of {n} entries")


@pytest.mark.parametrize("kind", KINDS)
def test_a_malformed_entry_is_rejected_with_its_reason_and_the_next_good_one_accepted(
    kind: str,
    app: App,
    client: redis.Redis,
    keys: Keys,
    tools_dir: Path,
    tmp_path: Path,
    workspace: Path,
) -> None:
    fields, reason_names = bad_entries(tools_dir, workspace, tmp_path)[kind]
    intake = Intake(app, client, keys)
    bad_id = client.xadd(keys.inbox, fields)
    client.xadd(keys.inbox, {"message": json.dumps(good_request(tools_dir, workspace, "run-good"))})

    poll_until(intake, 2)

    [(_, moved)] = client.xrange(keys.rejected)
    reason = moved[b"reason"].decode()
    assert all(name in reason for name in reason_names), reason
    assert moved[b"entry_id"] == bad_id
    assert {k: v.encode() for k, v in fields.items()} == {
        k.decode().removeprefix("field:"): v for k, v in moved.items() if k.startswith(b"field:")
    }
    assert load(app.store, "run-bad") is None
    assert load(app.store, "run-good").status is RunStatus.REQUESTING_MODEL
    assert client.xpending(keys.inbox, GROUP)["pending"] == 0


def test_republishing_a_request_is_a_no_op_and_reusing_its_run_id_is_rejected(
    app: App, client: redis.Redis, keys: Keys, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    first = request("run-1", spec, workspace)
    intake = Intake(app, client, keys)
    publish(client, keys, first)
    publish(client, keys, first)
    publish(client, keys, first.model_copy(update={"request_id": "someone-else"}))

    poll_until(intake, 3)

    [(_, moved)] = client.xrange(keys.rejected)
    assert "'run-1' exists already" in moved[b"reason"].decode()
    assert [e.type for e in app.store.read("run-1")] == ["RunCreated"]


def test_an_entry_taken_by_an_intake_that_died_is_handled_by_another(
    app: App, client: redis.Redis, keys: Keys, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    intake = Intake(app, client, keys)
    publish(client, keys, request("run-orphan", spec, workspace))
    # another intake read it and died before acknowledging it
    client.xreadgroup(GROUP, "dead-intake", {keys.inbox: ">"}, count=10)
    assert intake.poll_once(block_ms=10) == 0  # new entries only: it is not seen again

    assert intake.reclaim_once(min_idle_ms=0) == 1

    assert load(app.store, "run-orphan") is not None
    assert client.xpending(keys.inbox, GROUP)["pending"] == 0
