"""Parked runs cost nothing: a run waiting for an approval, with nothing due to a
worker, is loaded by the sweeper once (its first look after it parked) and then
not again until its deadline, however many passes go by; at the deadline it is
looked at and the approval expires as before; an answer or a cancel puts it
back in the writer's hands (and under the lease when its message is lost); a
run whose worker message was lost is still re-driven after the lease. Counts
and outcomes, with a manual clock (`agentledger.events.looks`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from handlerkit import Unit, call, new_unit, spec

from agentledger.events import controls
from agentledger.events.commands import DriveCall, RequestModel
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.schemas.spec import Policies
from agentledger.services.handlers.engine import Decided
from agentledger.services.loops import sweeper
from agentledger.services.loops.sweeper import sweep_once

DONE = {"end_turn": "done"}
TIMEOUT_S = 60.0  # the approval's


class Loads:
    """The runs the app loads from now on, one entry a load (a sweeper's look is
    a load or two)."""

    def __init__(self, unit: Unit, monkeypatch: pytest.MonkeyPatch) -> None:
        self.runs: list[str] = []
        load = unit.app.runs.load

        def counted(run_id: str, *args: Any, **kwargs: Any) -> RunState | None:
            self.runs.append(run_id)
            return load(run_id, *args, **kwargs)

        monkeypatch.setattr(unit.app.runs, "load", counted)


def parked_unit(tmp_path: Path, run_id: str = "run-a", *, looked: bool = True) -> Unit:
    """A unit whose run waits for a person to approve its delete, and the sweeper's
    first look at it (a lease after it parked) done, unless not `looked`."""
    unit = new_unit(tmp_path / "ws")
    run_spec = spec({"tool_use": [call("c1", "kv_delete", key="k")]}, DONE)
    unit.create(
        run_id, run_spec.model_copy(update={"policies": Policies(approval_timeout_s=TIMEOUT_S)})
    )
    unit.deliver(RequestModel(run_id))
    unit.deliver(DriveCall(run_id, "c1"))
    unit.take()  # the messages delivered by hand
    assert unit.state(run_id).status is RunStatus.AWAITING_APPROVAL
    if not looked:
        return unit
    unit.clock.advance(unit.app.settings.lease_s + 0.1)
    sweep_once(unit.app, [0])
    assert unit.take() == [], "nothing is due to a worker"
    return unit


def passes(unit: Unit, *, every_s: float, until: float) -> int:
    """Sweep every `every_s` until the clock reaches `until`; how many passes."""
    n = 0
    while unit.clock.now() + every_s < until:
        unit.clock.advance(every_s)
        sweep_once(unit.app, [0])
        n += 1
    return n


def test_a_parked_run_is_not_loaded_again_before_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unit = parked_unit(tmp_path)
    expires = unit.call_of("run-a", "c1").approval_expires_at
    assert expires is not None
    loads = Loads(unit, monkeypatch)
    every = unit.app.settings.sweep_interval_s

    n = passes(unit, every_s=every, until=expires - 0.1)

    assert n > 100, "many passes went by"
    assert loads.runs == [], "no look between its first and its deadline"
    assert unit.take() == [] and unit.sent == []
    assert unit.state("run-a").status is RunStatus.AWAITING_APPROVAL


def test_a_parked_run_is_looked_at_when_its_approval_expires_and_it_expires_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unit = parked_unit(tmp_path)
    expires = unit.call_of("run-a", "c1").approval_expires_at
    assert expires is not None
    passes(unit, every_s=unit.app.settings.sweep_interval_s, until=expires - 0.1)
    loads = Loads(unit, monkeypatch)

    unit.clock.advance(expires - unit.clock.now() + 0.01)  # the first pass after the deadline
    sweep_once(unit.app, [0])

    assert set(loads.runs) == {"run-a"}
    assert unit.appends_to("run-a")[-1][0] == "ApprovalDenied"
    assert unit.call_of("run-a", "c1").status is CallStatus.REJECTED
    assert unit.state("run-a").status is RunStatus.REQUESTING_MODEL
    assert unit.take() == [RequestModel("run-a")], "the model is told, through its pool"


def test_a_parked_runs_wall_clock_is_kept_when_it_comes_first(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws")
    run_spec = spec({"tool_use": [call("c1", "kv_delete", key="k")]}, DONE, max_wall_clock_s=20)
    unit.create("run-a", run_spec)  # the approval would expire after an hour
    unit.deliver(RequestModel("run-a"))
    unit.deliver(DriveCall("run-a", "c1"))
    unit.take()
    wall = unit.state("run-a").created_at + 20

    passes(unit, every_s=unit.app.settings.sweep_interval_s, until=wall + 0.5)

    assert unit.state("run-a").status is RunStatus.TIMEOUT


def test_an_approval_makes_a_parked_run_live_and_its_lost_message_is_redriven(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unit = parked_unit(tmp_path)
    lease = unit.app.settings.lease_s
    passes(unit, every_s=unit.app.settings.sweep_interval_s, until=unit.clock.now() + 3 * lease)
    unit.app.engine.take("run-a", Decided("intake", lambda s: controls.approve(s, "c1", by="al")))
    assert unit.take() == [DriveCall("run-a", "c1")]  # queued with the grant, then lost
    loads = Loads(unit, monkeypatch)

    unit.clock.advance(lease + 0.1)
    sweep_once(unit.app, [0])

    assert set(loads.runs) == {"run-a"}
    assert unit.take() == [DriveCall("run-a", "c1")], "re-driven a lease after the grant"


def test_an_answer_landing_during_a_look_is_not_hidden_by_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unit = parked_unit(tmp_path, looked=False)
    lease = unit.app.settings.lease_s
    look: Callable[..., float | None] = sweeper.next_look

    def answered_meanwhile(s: RunState, **kwargs: Any) -> float | None:
        unit.app.engine.take(
            "run-a", Decided("intake", lambda s: controls.approve(s, "c1", by="al"))
        )
        return look(s, **kwargs)  # the parked state the sweeper folded: its deadline

    monkeypatch.setattr(sweeper, "next_look", answered_meanwhile)
    unit.clock.advance(lease + 0.1)
    sweep_once(unit.app, [0])  # looked at the parked run; the grant landed before its touch
    monkeypatch.setattr(sweeper, "next_look", look)
    assert unit.take() == [DriveCall("run-a", "c1")]  # queued with the grant, then lost

    unit.clock.advance(lease + 0.1)
    sweep_once(unit.app, [0])

    assert unit.take() == [DriveCall("run-a", "c1")], "the grant's score won over the look"


def test_a_cancelled_parked_run_is_not_looked_at_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unit = parked_unit(tmp_path)
    unit.app.engine.take(
        "run-a", Decided("intake", lambda s: controls.cancel(s, by="al", source="cli"))
    )
    assert unit.state("run-a").status is RunStatus.CANCELLED
    loads = Loads(unit, monkeypatch)

    passes(unit, every_s=1.0, until=unit.clock.now() + 2 * TIMEOUT_S)

    assert loads.runs == []


def test_a_run_whose_worker_message_was_lost_is_redriven_after_each_lease_beside_parked_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unit = parked_unit(tmp_path, "run-p")
    unit.create("run-a", spec(DONE))
    assert unit.take() == [RequestModel("run-a")]  # lost
    lease = unit.app.settings.lease_s
    loads = Loads(unit, monkeypatch)

    sent = []
    for _ in range(3):
        unit.clock.advance(lease + 0.1)
        sweep_once(unit.app, [0])
        sent += unit.take()

    assert sent == [RequestModel("run-a")] * 3
    assert set(loads.runs) == {"run-a"}, "the parked run-p is not looked at meanwhile"
