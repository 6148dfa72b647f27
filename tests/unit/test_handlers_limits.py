"""Concurrency keys through the handlers and the in-memory lock table: a call of a
tool with `limits` holds a slot of each key it names, across runs; a call of
another run waits, recording the key it waits for, and is told by a command when
the slot comes back; a key made from a hostile argument is refused before it is
asked for; the operator's limit is what the call records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import unit_tools
from handlerkit import Unit, call, new_unit, spec

from agentledger.events.commands import DriveCall, RequestModel
from agentledger.events.types import ToolCallRejected, ToolCallValidated, ToolCallWaiting

DONE = {"end_turn": "done"}


@pytest.fixture
def unit(tmp_path: Path) -> Unit:
    return new_unit(tmp_path / "ws", lock_lease_s=600.0)


def pay(call_id: str, acct: str = "a1", **args: Any) -> dict[str, Any]:
    return {"tool_use": [call(call_id, "pay", acct=acct, **args)]}


def ready(unit: Unit, run_id: str, *turns: dict[str, Any]) -> None:
    unit.create(run_id, spec(*turns, DONE))
    unit.deliver(RequestModel(run_id))
    unit.take()


def data(unit: Unit, run_id: str, kind: type) -> list[Any]:
    return [e.data for e in unit.memory.read(run_id) if isinstance(e.data, kind)]


def test_a_call_of_another_run_waits_for_the_keys_slot_and_is_told_when_it_comes_back(
    unit: Unit,
) -> None:
    ready(unit, "run-a", pay("a1", at="a1"))
    ready(unit, "run-b", pay("b1", acct="b2"))
    holder = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")

    unit.deliver(DriveCall("run-b", "b1"))

    [validated] = data(unit, "run-b", ToolCallValidated)
    assert validated.limits == {"svc:pay": 1, "tenant:unit-tenant:acct:b2": 5}
    [waiting] = data(unit, "run-b", ToolCallWaiting)
    assert "limit:svc:pay" in waiting.waiting_for
    assert unit_tools.RAN["b1"] == 0
    unit_tools.gate("a1").set()
    holder.join()
    assert unit.sent == [DriveCall("run-b", "b1")], "the waiter is told when the slot is free"
    unit.deliver(DriveCall("run-b", "b1"))
    assert unit_tools.RAN == {"a1": 1, "b1": 1}
    assert unit.foreign_appends() == []


def test_an_argument_that_would_reach_another_tenants_key_is_refused(unit: Unit) -> None:
    ready(unit, "run-a", pay("a1", acct="x:tenant:other"))
    unit.deliver(DriveCall("run-a", "a1"))
    [rejected] = data(unit, "run-a", ToolCallRejected)
    assert rejected.error.code == "invalid_arguments"
    assert "limit key 'tenant:{tenant}:acct:{acct}'" in rejected.error.message
    assert unit_tools.RAN["a1"] == 0


def test_the_operators_limit_is_the_one_the_call_holds(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws", lock_lease_s=600.0, limits=(("svc:pay", 3),))
    ready(unit, "run-a", pay("a1"))
    unit.deliver(DriveCall("run-a", "a1"))
    [validated] = data(unit, "run-a", ToolCallValidated)
    assert validated.limits["svc:pay"] == 3
    assert unit_tools.RAN["a1"] == 1


def test_a_rate_limited_answer_closes_the_key_for_every_run_until_its_retry_after(
    unit: Unit,
) -> None:
    """run-a's call is answered "retry after 30 s" while run-b's waits for the slot:
    the slot run-a gives back goes to nobody; run-b's call records that it backs off
    (told by a command, never asked of the model again) and runs only once the
    expiry pass after the 30 s reopens the key."""
    from agentledger.events.types import ToolCallBackedOff, ToolCallFailed
    from agentledger.services.loops.sweeper import expire_leases

    ready(unit, "run-a", pay("a1", at="a1", busy_s="30"))
    ready(unit, "run-b", pay("b1", acct="b2"))  # its own account: only svc:pay is shared
    holder = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")
    unit.deliver(DriveCall("run-b", "b1"))
    assert data(unit, "run-b", ToolCallWaiting)[0].holders["limit:svc:pay"] == 1
    unit_tools.gate("a1").set()
    holder.join()
    [failed] = data(unit, "run-a", ToolCallFailed)
    assert (failed.error.code, failed.error.retry_after_s) == ("rate_limited", 30.0)
    assert DriveCall("run-b", "b1") in unit.sent, "the waiter is told of the back-off"

    unit.deliver(DriveCall("run-b", "b1"))
    [backed] = data(unit, "run-b", ToolCallBackedOff)
    assert backed.keys == ("limit:svc:pay",) and backed.until == unit.clock.now() + 30.0
    assert unit.state("run-b").current_turn.calls[0].backed_off_until == backed.until
    unit.deliver(DriveCall("run-b", "b1"))  # asked again: nothing new to record
    assert len(data(unit, "run-b", ToolCallBackedOff)) == 1

    unit.clock.advance(29.0)
    expire_leases(unit.app)
    assert unit_tools.RAN["b1"] == 0, "no call before the retry-after"
    unit.clock.advance(1.0)
    unit.sent.clear()
    expire_leases(unit.app)
    assert unit.sent == [DriveCall("run-b", "b1")], "scheduled when the key reopens"
    unit.deliver(DriveCall("run-b", "b1"))
    assert unit_tools.RAN["b1"] == 1
    assert [e.type for e in unit.memory.read("run-b")].count("ModelRequested") == 1


def test_a_service_cannot_close_a_shared_key_for_longer_than_the_maximum(unit: Unit) -> None:
    from agentledger.events.lock_step import MAX_BACKOFF_S

    ready(unit, "run-a", pay("a1", busy_s="1e9"))
    unit.deliver(DriveCall("run-a", "a1"))
    looked = unit.app.locks.look(["limit:svc:pay"])["limit:svc:pay"]
    assert looked.closed_until == unit.clock.now() + MAX_BACKOFF_S


def test_status_says_what_a_waiting_call_waits_for(unit: Unit) -> None:
    from agentledger.services.entrypoints.summary import run_summary, waits_line

    ready(unit, "run-a", pay("a1", at="a1"))
    ready(unit, "run-b", pay("b1", acct="b2"))
    holder = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")
    unit.deliver(DriveCall("run-b", "b1"))
    [call_b] = run_summary(unit.state("run-b"))["tool_calls"]
    assert call_b["status"] == "waiting"
    assert waits_line(call_b["waits"]) == (
        "waits for limit:svc:pay (1 of 1 holding), limit:tenant:unit-tenant:acct:b2 (0 of 5 holding)"
    )
    unit_tools.gate("a1").set()
    holder.join()
