"""Runs created together (`Runs.create_many`, the intake's batch): each run's
outcome in its place — its state, the ConcurrencyConflict of a run that exists,
or what its own events met — and one run's failure touches no other; each run
created has its first command queued with its first event, as `create` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from handlerkit import QUEUE, Unit, decoded, new_unit, spec

from agentledger.events.commands import RequestModel
from agentledger.events.state import RunState
from agentledger.events.types import RunCreated
from agentledger.services.errors import ConcurrencyConflict

DONE = {"end_turn": "done"}


@pytest.fixture
def unit(tmp_path: Path) -> Unit:
    return new_unit(tmp_path / "ws")


def created(unit: Unit, request_id: str) -> RunCreated:
    return RunCreated(
        spec=spec(DONE), request_id=request_id, workspace=str(unit.workspace),
        base_dir=str(unit.workspace.parent), queue=QUEUE, toolset=unit.app.toolset.fingerprint,
    )  # fmt: skip


def test_each_run_is_created_and_one_that_exists_conflicts_alone(unit: Unit) -> None:
    unit.create("run-old", spec(DONE))
    asked = [(created(unit, r), r, f"entry-{r}") for r in ("run-a", "run-old", "run-b")]

    a, old, b = unit.app.runs.create_many(asked, source="intake")

    assert isinstance(a, RunState) and isinstance(b, RunState)
    assert isinstance(old, ConcurrencyConflict)
    assert unit.types("run-a") == unit.types("run-b") == ["RunCreated"]
    assert unit.types("run-old") == ["RunCreated"]  # untouched
    assert unit.memory.read("run-a")[0].causation_id == "entry-run-a"
    queued = decoded(unit.memory.outbox.take())  # queued by the appends, with their events
    assert queued.count(RequestModel("run-a")) == queued.count(RequestModel("run-b")) == 1


def test_what_one_runs_events_meet_is_its_own(unit: Unit, monkeypatch: pytest.MonkeyPatch) -> None:
    real = unit.app.runs.as_stored

    def broken(run_id: str, batch: Any) -> Any:
        if run_id == "run-bad":
            raise ValueError("cannot store this one")
        return real(run_id, batch)

    monkeypatch.setattr(unit.app.runs, "as_stored", broken)
    asked = [(created(unit, r), r, None) for r in ("run-a", "run-bad", "run-b")]

    a, bad, b = unit.app.runs.create_many(asked, source="intake")

    assert isinstance(bad, ValueError) and str(bad) == "cannot store this one"
    assert isinstance(a, RunState) and isinstance(b, RunState)
    assert unit.memory.read("run-bad") == []
    assert unit.app.runs.load("run-a") is not None and unit.app.runs.load("run-b") is not None
