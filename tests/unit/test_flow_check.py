"""A flow's spec is checked before anything runs (`agentledger.events.flow_check`, through
the spec check): templates naming what the flow cannot have, a stage reaching for tool
modules beyond its flow's, checks on the flow's own run, bad stages and routes."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agentledger.schemas.spec import RunSpec
from agentledger.services.handlers.spec_check import spec_problems

MODEL = {"scripted": [{"end_turn": "done"}]}


def flow(*stages: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"task": "t", "tools": ["a_tools"], "principal": {"id": "p", "tenant": "t"},
            "flow": list(stages), **more}  # fmt: skip


def problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p.field, p.reason) for p in spec_problems(RunSpec.model_validate(raw), None)]


def test_a_flow_with_sound_stages_has_no_problems() -> None:
    assert problems(flow({"id": "a", "agent": {"task": "{input.task}", "model": MODEL}},
                         {"id": "b", "call": {"tool": "x", "input": {"k": "{a.result.k}"}}},
                         {"id": "c", "human": {"question": "ok {b.outcome}?"}})) == []  # fmt: skip


def test_what_a_flow_cannot_have_is_named_before_it_runs() -> None:
    found = problems(
        flow(
            {"id": "a", "agent": {"task": "{ghost.result}", "tools": ["b_tools"], "model": MODEL}},
            {"id": "b", "human": {"question": "{input.spec}"}},
            acceptance=[{"command": "true"}],
        )
    )
    assert found == [
        (
            "acceptance",
            "a flow's own run runs no checks: give them to its agent stages, or a call stage",
        ),
        ("flow.0.agent.task", "{ghost.result}: the flow has no stage 'ghost'"),
        ("flow.0.agent.tools", "tool modules ['b_tools'] are not among the flow's `tools`"),
        ("flow.1.human.question", "{input.spec}: `input` has only `task`"),
    ]


@pytest.mark.parametrize(
    ("stages", "said"),
    [
        ([{"id": "a", "call": {"tool": "x"}, "on": {"completed": "a"}}], "no outcome 'completed'"),
        ([{"id": "a", "call": {"tool": "x"}, "on": {"failed": "zz"}}], "which is no stage"),
        (
            [{"id": "a", "call": {"tool": "x"}}, {"id": "a", "human": {"question": "q"}}],
            "used twice",
        ),
        ([{"id": "a", "call": {"tool": "x"}, "human": {"question": "q"}}], "exactly one of"),
        ([{"id": "a", "agent": {"task": "t"}}], "no 'model', and the flow names none"),
        ([{"id": "input", "call": {"tool": "x"}}], "reserved word"),
        ([], "at least one stage"),
    ],
)
def test_a_bad_stage_or_route_is_refused_by_name(stages: list[dict[str, Any]], said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        RunSpec.model_validate(flow(*stages))


def test_a_childs_id_keeps_its_flows_shard_and_fits_a_run_id() -> None:
    from agentledger.events.flow_children import child_id
    from agentledger.schemas.names import RUN_ID_PATTERN

    assert child_id("r-1a2b.s13", "fix", 2) == "r-1a2b.fix.2.s13"
    long = child_id("r" + "x" * 120 + ".s7", "a_long_stage_name_of_32_chars_xx", 99)
    assert long.endswith(".a_long_stage_name_of_32_chars_xx.99.s7") and len(long) <= 128
    import re

    assert re.match(RUN_ID_PATTERN, long)
    assert child_id("r" + "x" * 120 + ".s7", "b", 1) != child_id("r" + "x" * 121 + ".s7", "b", 1)


def test_a_template_reads_only_earlier_stages_and_no_placeholder_is_left_unclosed() -> None:
    found = problems(flow(
        {"id": "a", "agent": {"task": "{a.result} and {b.outcome}", "model": MODEL}},
        {"id": "b", "human": {"question": "ship {a.result.k? or {input.task"}},
    ))  # fmt: skip
    assert found == [
        ("flow.0.agent.task", "{a.result}: stage 'a' is not before this one: a template "
         "reads earlier stages"),
        ("flow.0.agent.task", "{b.outcome}: stage 'b' is not before this one: a template "
         "reads earlier stages"),
        ("flow.1.human.question", "{input.…: a placeholder left unclosed or malformed (write "
         "{input.task}, or {{ for a brace)"),
        ("flow.1.human.question", "{a.…: a placeholder left unclosed or malformed (write "
         "{a.result.key}, or {{ for a brace)"),
    ]  # fmt: skip


def test_max_loops_0_is_refused_only_with_a_route_back() -> None:
    back = ({"id": "a", "call": {"tool": "x"}}, {"id": "b", "call": {"tool": "x"},
                                                 "on": {"failed": "a"}})  # fmt: skip
    assert problems(flow(*back, max_loops=0)) == [
        ("max_loops", "0 allows no route back, but stage 'b' routes failed back to 'a': set "
         "max_loops to 1 or more, or route failed elsewhere"),
    ]  # fmt: skip
    assert problems(flow(*back, max_loops=1)) == []
    assert problems(flow(back[0], max_loops=0)) == []


def test_the_new_outcomes_are_routes_of_their_kinds_only() -> None:
    RunSpec.model_validate(flow({"id": "a", "human": {"question": "q"}, "on": {"replied": "a"}}))
    with pytest.raises(ValidationError, match="no outcome 'replied' for a call stage"):
        RunSpec.model_validate(flow({"id": "a", "call": {"tool": "x"}, "on": {"replied": "a"}}))
    with pytest.raises(ValidationError, match="no outcome 'awaiting_human' for a human stage"):
        RunSpec.model_validate(
            flow({"id": "a", "human": {"question": "q"}, "on": {"awaiting_human": "a"}})
        )
