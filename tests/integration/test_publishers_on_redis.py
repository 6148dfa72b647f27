"""The intake's publisher checks against a real Redis: an entry is taken only
when signed with its publisher's key (in the file, or in the variable
`key_env` names), only within the grant, and a run holds only the scopes its
grant allows, recorded in RunCreated. The file is read again when it changes
(a publisher added reaches a running intake: its streams are read from then on;
one removed is read no more); a broken file refuses every entry with the
reason, never keeping an old grant in force. A control is taken only from a
publisher granted the run's principal."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from itkit import QUEUE, file_publisher, scripted_spec
from test_intake_on_redis import pending, poll_until, rejected, request

from agentledger.events.types import RunCreated
from agentledger.schemas.inbox import RunCancelRequested
from agentledger.schemas.spec import Principal
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.handlers.app import App
from agentledger.services.keys import Keys
from agentledger.services.loops.intake import Intake
from agentledger.services.settings import Settings


def spec_for(tools_dir: Path, *scopes: str, id_: str = "alice", tenant: str = "shop-1"):  # type: ignore[no-untyped-def]
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    return spec.model_copy(update={"principal": Principal(id=id_, tenant=tenant, scopes=scopes)})


def file_(settings: Settings, name: str, **grant: object) -> Signer:
    file_publisher(Path(settings.publishers_path), name, **grant)  # type: ignore[arg-type]
    return publishers_file.signer(settings.publishers_path, name)


def only_reason(client: redis.Redis, keys: Keys) -> str:
    [moved] = rejected(client, keys)
    return moved[b"reason"].decode()


def test_a_run_holds_the_scopes_it_asks_for_within_the_grant_recorded_in_run_created(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings,
    tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    billing = file_(settings, "billing-svc", principals=["alice@shop-1"],
                    scopes=["stock:read", "stock:write"], queues=[QUEUE])  # fmt: skip
    publish(client, keys, request(app, "run-ok", spec_for(tools_dir, "stock:read"), workspace),
            signer=billing)  # fmt: skip
    poll_until(intake, 1)
    [first] = app.store.read("run-ok")
    assert isinstance(first.data, RunCreated)
    assert first.data.publisher == "billing-svc"
    assert first.data.spec.principal.scopes == ("stock:read",)
    assert rejected(client, keys) == [] and pending(client, keys) == 0


@pytest.mark.parametrize(
    ("grant", "scopes", "reason"),
    [
        ({"scopes": ["stock:read"]}, ("stock:read", "stock:write"),
         "not granted: 'p' may not grant the scopes ['stock:write']"),
        ({"principals": ["bob@shop-1"]}, (), "not granted: 'p' may not act for principal alice@shop-1"),
        ({"principals": ["alice@shop-2"]}, (), "not granted: 'p' may not act for principal alice@shop-1"),
        ({"queues": ["default"]}, (), "not granted: 'p' may not publish to task queue 'it'"),
    ],
)  # fmt: skip
def test_a_request_outside_the_grant_is_rejected_with_its_reason_and_creates_no_run(
    grant: dict[str, object], scopes: tuple[str, ...], reason: str, app: App,
    client: redis.Redis, keys: Keys, intake: Intake, settings: Settings, tools_dir: Path,
    workspace: Path,
) -> None:  # fmt: skip
    full = {"principals": ["alice@shop-1"], "scopes": ["*"], "queues": [QUEUE], **grant}
    p = file_(settings, "p", **full)
    publish(client, keys, request(app, "run-x", spec_for(tools_dir, *scopes), workspace), signer=p)
    poll_until(intake, 1)
    assert only_reason(client, keys) == reason
    assert app.runs.load("run-x") is None and pending(client, keys) == 0


def test_a_publishers_stream_is_read_only_while_it_is_in_the_file(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings,
    tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    late = Signer("late", "cd" * 32)
    publish(client, keys, request(app, "run-1", spec_for(tools_dir), workspace), signer=late)
    assert intake.poll_once(block_ms=50) == 0  # nobody's stream: never read, never acted on
    assert app.runs.load("run-1") is None and rejected(client, keys) == []

    late = file_(settings, "late")  # filed with a new key: read from now on, from its start
    publish(client, keys, request(app, "run-2", spec_for(tools_dir), workspace), signer=late)
    poll_until(intake, 2)
    assert app.runs.load("run-2") is not None and app.runs.load("run-1") is None
    assert only_reason(client, keys).startswith("bad signature")  # run-1's, signed with the old key

    Path(settings.publishers_path).write_text("publishers: {}\n")
    publish(client, keys, request(app, "run-3", spec_for(tools_dir), workspace), signer=late)
    assert intake.poll_once(block_ms=50) == 0  # removed: its stream is left alone
    assert app.runs.load("run-3") is None and len(rejected(client, keys)) == 1
    assert pending(client, keys, ("late",)) == 1


def test_a_broken_publishers_file_refuses_every_entry_with_the_reason(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings, signer: Signer,
    tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    assert intake.poll_once(block_ms=10) == 0  # it has read the file: whose streams to read
    Path(settings.publishers_path).write_text("publishers: {p: {key: 12}}\n")
    publish(client, keys, request(app, "run-b", spec_for(tools_dir), workspace), signer=signer)
    poll_until(intake, 1)
    reason = only_reason(client, keys)
    assert reason.startswith("the publishers file is broken: AGENTLEDGER_PUBLISHERS:"), reason
    assert app.runs.load("run-b") is None


def test_a_key_kept_in_a_variable_signs_and_an_unset_variable_signs_nothing(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings,
    tools_dir: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    key = "ef" * 32
    with open(settings.publishers_path, "a") as f:  # appended under the file's `publishers:`
        f.write("  env-svc:\n    key_env: IT_PUBLISHER_KEY\n    principals: [{id: '*', tenant: '*'}]\n"
                "    queues: ['*']\n    workspaces: ['/']\n")  # fmt: skip
    by_env = Signer("env-svc", key)
    publish(client, keys, request(app, "run-e1", spec_for(tools_dir), workspace), signer=by_env)
    poll_until(intake, 1)
    assert only_reason(client, keys).startswith("unknown publisher: 'env-svc' has no key")

    monkeypatch.setenv("IT_PUBLISHER_KEY", key)
    publish(client, keys, request(app, "run-e2", spec_for(tools_dir), workspace), signer=by_env)
    poll_until(intake, 1)
    assert app.runs.load("run-e2") is not None


def test_a_control_is_taken_only_from_a_publisher_granted_the_runs_principal(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings, signer: Signer,
    tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    publish(client, keys, request(app, "run-c", spec_for(tools_dir), workspace), signer=signer)
    poll_until(intake, 1)
    bobs = file_(settings, "bobs", principals=["bob@shop-1"])
    cancel = RunCancelRequested(run_id="run-c", by="mallory", reason="not mine")
    publish(client, keys, cancel, signer=bobs)
    poll_until(intake, 1)
    assert (
        only_reason(client, keys)
        == "not granted: 'bobs' may not control runs of principal alice@shop-1"
    )
    assert [e.type for e in app.store.read("run-c")] == ["RunCreated"]

    alices = file_(settings, "alices", principals=["alice@shop-1"])
    publish(client, keys, cancel.model_copy(update={"by": "alice"}), signer=alices)
    poll_until(intake, 1)
    assert "RunCancelRequested" in [e.type for e in app.store.read("run-c")]
