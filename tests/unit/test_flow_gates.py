"""A flow's gate answered by `approve`/`deny`/`reply` (a reply is the gate's result,
routed by `on: {replied: …}`, data in later templates), and an agent stage routed on its
child's wait for a person (`on: {awaiting_human: …}`: the child cancelled, its spend
the flow's, to the token)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import unit_tools
from handlerkit import Unit, new_unit
from test_flows import FIRST, GATE, LAST, PARENT, children, flow_spec

from agentledger.events import controls
from agentledger.events.errors import ControlRefused
from agentledger.events.status import RunStatus
from agentledger.events.types import ChildRunEnded, HumanReplied
from agentledger.services.handlers.engine import Decided

NOTE = {"id": "note", "call": {"tool": "kv_write", "input": {"key": "said",
                                                             "value": "{gate.result.reply}"}}}  # fmt: skip
REPLIED_GATE = {**GATE, "on": {"approved": "last", "replied": "note"}}


@pytest.fixture
def unit(tmp_path: Path) -> Unit:
    return new_unit(tmp_path / "ws")


def reply(unit: Unit, text: str) -> None:
    unit.app.engine.take(
        PARENT,
        Decided("test", lambda s: controls.reply(s, by="pat", text=text, escalation=s.escalation)),
    )
    unit.drive()


def test_a_reply_at_a_gate_is_its_result_routed_by_replied_and_never_templated(
    unit: Unit,
) -> None:
    unit.create(PARENT, flow_spec(FIRST, REPLIED_GATE, LAST, NOTE))
    unit.drive()
    assert unit.state(PARENT).escalated_for == "flow_gate"
    reply(unit, "not yet: {input.task}")

    parent = unit.state(PARENT)
    assert parent.status is RunStatus.COMPLETED
    assert parent.flow is not None and parent.flow.result("gate") == {
        "by": "pat", "reply": "not yet: {input.task}"}  # fmt: skip
    assert parent.flow.outcome_of("gate") == "replied"
    assert children(unit) == ["r-flow.first.1.s0", "r-flow.note.1.s0"]  # `last` never ran
    note = unit.state("r-flow.note.1.s0").turns[0].calls[0]
    assert note.input == {"key": "said", "value": "not yet: {input.task}"}  # data, as written
    assert "HumanReplied" in unit.types(PARENT)


def test_a_reply_at_a_gate_that_routes_none_is_refused_naming_the_gate(unit: Unit) -> None:
    unit.create(PARENT, flow_spec(FIRST, GATE, LAST))
    unit.drive()
    s = unit.state(PARENT)
    with pytest.raises(ControlRefused, match="gate 'gate' takes no reply"):
        controls.reply(s, by="pat", text="hm", escalation=s.escalation)
    with pytest.raises(ControlRefused, match="a reply needs some text"):
        controls.reply(_with_route(s), by="pat", text="  ", escalation=s.escalation)


def _with_route(s: Any) -> Any:
    from agentledger.events.frozen import replace

    spec = s.spec.model_copy(update={"flow": flow_spec(FIRST, REPLIED_GATE, LAST, NOTE).flow})
    return replace(s, spec=spec)


SHY = {
    "id": "shy",
    "agent": {"task": "t", "model": {"scripted": [
        {"refusal": "I would rather ask"}, {"end_turn": '{"summary": "ok", "key": "a"}'}]}},
    "on": {"awaiting_human": "ask"},
}  # fmt: skip
ASK = {"id": "ask", "human": {"question": "shy asked: {shy.result.summary}"},
       "on": {"approved": "last", "denied": "stop"}}  # fmt: skip
LAST_A = {"id": "last", "call": {"tool": "kv_write", "input": {"key": "a", "value": "final"}}}


def test_a_stage_routed_on_its_childs_wait_goes_on_and_cancels_the_child(unit: Unit) -> None:
    unit.create(PARENT, flow_spec(SHY, ASK, LAST_A))
    unit.drive()
    parent = unit.state(PARENT)
    [kid] = children(unit)
    assert parent.status is RunStatus.AWAITING_HUMAN
    assert parent.escalated_for == "flow_gate"  # the flow's own gate, not the child's wait
    assert parent.detail.startswith("shy asked: ")
    assert "the model refused at turn 1" in parent.detail  # what the child waits on
    [end] = [e.data for e in unit.memory.read(PARENT) if isinstance(e.data, ChildRunEnded)]
    assert (end.outcome, end.status, end.result["run"]) == ("awaiting_human", "awaiting_human", kid)
    child = unit.state(kid)
    assert child.status is RunStatus.CANCELLED  # its end recorded in its own log
    assert child.cancel_by == f"flow {PARENT}"
    assert (parent.usage, parent.cost_usd) == (child.usage, child.cost_usd)  # to the token

    unit.app.engine.take(
        PARENT, Decided("test", lambda s: controls.resume(s, by="pat", escalation=s.escalation))
    )
    unit.drive()
    assert unit.state(PARENT).status is RunStatus.COMPLETED
    assert unit_tools.RAN == {"last-1": 1}


def test_without_the_route_a_childs_wait_still_puts_the_flow_in_wait(unit: Unit) -> None:
    plain = {k: v for k, v in SHY.items() if k != "on"}
    unit.create(PARENT, flow_spec(plain, LAST_A))
    unit.drive()
    assert unit.state(PARENT).escalated_for == "child_waits"
    assert not [e for e in unit.memory.read(PARENT) if isinstance(e.data, HumanReplied)]
