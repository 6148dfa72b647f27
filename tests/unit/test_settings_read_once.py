"""What a call reads of the settings is made once per app, not at every call: the
sandbox policy the settings describe (a Settings object hashes all its fields to
look it up) is made at the first call that needs it and kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from handlerkit import call, carrying, new_unit, spec

from agentledger.events.commands import RequestModel
from agentledger.events.status import RunStatus
from agentledger.services.adapters.tools import sandbox
from agentledger.services.handlers import app as app_module


def test_a_carried_run_of_many_calls_makes_its_sandbox_policy_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[object] = []

    def counted(settings: object) -> sandbox.SandboxPolicy:
        made.append(settings)
        return sandbox.policy_for(settings)  # type: ignore[arg-type]

    monkeypatch.setattr(app_module, "policy_for", counted)
    unit = new_unit(tmp_path / "ws", carry=carrying())
    turns = [{"tool_use": [call(f"c{i}", "kv_read", key="k")]} for i in range(5)]
    unit.create("run-a", spec(*turns, {"end_turn": "done"}, max_turns=10))
    unit.take()

    unit.deliver(RequestModel("run-a"))

    assert unit.state("run-a").status is RunStatus.COMPLETED
    assert made == [unit.app.settings], "made again for a later call"
    assert unit.app.sandbox.enabled is (unit.app.settings.sandbox == "on")
