"""The intake decides where a run works, against a real Redis: a workspace
inside the publisher's granted root becomes a copy under the state folder; one
outside it is rejected with the reason, no run created and nothing copied; the
same request given to the intake again (it died before acknowledging it) keeps
the copy its run has changed."""

from __future__ import annotations

from pathlib import Path

import redis
from itkit import scripted_spec
from test_intake_on_redis import everything, poll_until, rejected, request
from test_publishers_on_redis import file_

from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.handlers.app import App
from agentledger.services.keys import Keys
from agentledger.services.loops.intake import Intake
from agentledger.services.settings import Settings


def test_a_workspace_in_the_granted_root_becomes_a_copy_under_the_state_folder(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings,
    tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    (workspace / "stock.json").write_text('{"A1": 5}')
    narrow = file_(settings, "billing-svc", workspaces=[str(workspace.parent)])
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    publish(client, keys, request(app, "run-1", spec, workspace), signer=narrow)
    poll_until(intake, 1)

    run = app.runs.load("run-1")
    assert run is not None and run.workspace == str(Path(settings.state_dir, "workspaces", "run-1"))
    assert (Path(run.workspace) / "stock.json").read_text() == '{"A1": 5}'
    assert rejected(client, keys) == []


def test_a_workspace_outside_the_granted_root_is_rejected_and_nothing_is_created_or_copied(
    app: App, client: redis.Redis, keys: Keys, intake: Intake, settings: Settings,
    tools_dir: Path, workspace: Path,
) -> None:  # fmt: skip
    narrow = file_(settings, "billing-svc", workspaces=[str(workspace)])
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    publish(client, keys, request(app, "run-etc", spec, Path("/etc")), signer=narrow)
    poll_until(intake, 1)

    [moved] = rejected(client, keys)
    assert moved[b"reason"].decode() == (
        f"workspace: '/etc' is not inside a workspace root granted to 'billing-svc' "
        f"(granted: [{str(workspace)!r}])"
    )
    assert app.runs.load("run-etc") is None
    assert not Path(settings.state_dir, "workspaces").exists()


def test_a_request_handled_again_keeps_the_copy_its_run_has_changed(
    app: App, intake: Intake, settings: Settings, tools_dir: Path, workspace: Path
) -> None:
    (workspace / "stock.json").write_text('{"A1": 5}')
    message = request(
        app, "run-1", scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir), workspace
    )
    assert intake.accept(message, everything()) == "run-1"
    copy = Path(settings.state_dir, "workspaces", "run-1")
    (copy / "stock.json").write_text('{"A1": 3}')  # the run reserved two
    (copy / "notes.txt").write_text("made by the run")
    made = copy.stat().st_ino

    assert intake.accept(message, everything()) == "run-1"  # given again: the same run

    assert copy.stat().st_ino == made
    assert (copy / "stock.json").read_text() == '{"A1": 3}'
    assert (copy / "notes.txt").read_text() == "made by the run"
    assert [e.type for e in app.store.read("run-1")] == ["RunCreated"]
