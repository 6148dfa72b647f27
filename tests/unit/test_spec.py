"""The run spec a user writes by hand: the documented shape validates, and every
mistake is refused naming where it is (the pydantic error's `loc`), never
silently changing what a run does."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from schemas.spec import (
    AnthropicModel,
    CommandCheck,
    RunSpec,
    ScriptedModel,
    ToolCheck,
    ToolSpec,
)

EXAMPLE = """
task: "How many A1 can we sell? Reserve 2."
workspace: ./ws
copy_workspace: true
tools: [inventory_tools]
principal: {id: alice, tenant: shop-1, scopes: [stock:read, stock:write]}
budgets: {max_turns: 8}
model:
  scripted:
    - tool_use: [{id: c17, name: lookup_stock, input: {sku: A1}}]
    - tool_use: [{id: c18, name: reserve_stock, input: {sku: A1, qty: 2}}]
    - end_turn: "3 were available; 2 are reserved."
acceptance:
  - command: "python check_stock.py"
  - tool: lookup_stock
    input: {sku: A1}
    expect: {available: 1}
"""


def example() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(EXAMPLE))


def locs(spec: dict[str, Any]) -> list[tuple[str | int, ...]]:
    with pytest.raises(ValidationError) as err:
        RunSpec.model_validate(spec)
    return [e["loc"] for e in err.value.errors()]


def test_the_example_spec_validates() -> None:
    spec = RunSpec.model_validate(example())
    assert spec.budgets.max_turns == 8
    assert spec.principal.scopes == ("stock:read", "stock:write")
    assert isinstance(spec.model, ScriptedModel)
    turns = spec.model.scripted
    assert [t.tool_use[0].name if t.tool_use else None for t in turns] == [
        "lookup_stock",
        "reserve_stock",
        None,
    ]
    assert turns[2].end_turn == "3 were available; 2 are reserved."
    command, tool = spec.acceptance
    assert command == CommandCheck(command="python check_stock.py")
    assert isinstance(tool, ToolCheck) and tool.expect == {"available": 1}


def test_a_spec_survives_a_json_round_trip() -> None:
    spec = RunSpec.model_validate(example())
    assert RunSpec.model_validate(spec.model_dump(mode="json")) == spec


def test_the_smallest_spec_gets_default_budgets() -> None:
    spec = RunSpec.model_validate(
        {
            "task": "t",
            "principal": {"id": "a", "tenant": "t"},
            "model": {"scripted": [{"end_turn": "done"}]},
        }
    )
    assert spec.budgets.max_turns == 8 and spec.acceptance == () and spec.tools == ()


def test_an_anthropic_model_validates() -> None:
    spec = example()
    spec["model"] = {"anthropic": {"model": "claude-sonnet-4-5", "max_tokens": 1024}}
    model = RunSpec.model_validate(spec).model
    assert isinstance(model, AnthropicModel) and model.anthropic.max_tokens == 1024


def test_a_turn_with_both_tool_use_and_end_turn_is_refused() -> None:
    spec = example()
    spec["model"]["scripted"][1]["end_turn"] = "and done"
    [loc] = locs(spec)
    assert loc[0] == "model" and "scripted" in loc and loc[-1] == 1


@pytest.mark.parametrize("turn", [{}, {"delay_s": 1}, {"tool_use": []}])
def test_a_turn_without_a_call_or_an_end_is_refused(turn: dict[str, Any]) -> None:
    spec = example()
    spec["model"]["scripted"][0] = turn
    [loc] = locs(spec)
    assert loc[0] == "model" and loc[-1] == 0


def test_an_unknown_top_level_key_is_refused() -> None:
    assert locs({**example(), "max_turns": 3}) == [("max_turns",)]


def test_an_unknown_nested_key_is_refused() -> None:
    spec = example()
    spec["principal"]["role"] = "admin"
    assert locs(spec) == [("principal", "role")]


@pytest.mark.parametrize("model", [{"openai": {"model": "x"}}, {}, "scripted"])
def test_a_model_without_scripted_or_anthropic_is_refused(model: Any) -> None:
    spec = {**example(), "model": model}
    with pytest.raises(ValidationError) as err:
        RunSpec.model_validate(spec)
    [error] = err.value.errors()
    assert error["loc"] == ("model",)
    assert "'scripted' or 'anthropic'" in error["msg"]


@pytest.mark.parametrize("max_turns", [0, -1, 10_001])
def test_max_turns_out_of_range_is_refused(max_turns: int) -> None:
    spec = example()
    spec["budgets"]["max_turns"] = max_turns
    assert locs(spec) == [("budgets", "max_turns")]


def test_an_empty_script_is_refused() -> None:
    spec = example()
    spec["model"]["scripted"] = []
    [loc] = locs(spec)
    assert loc[0] == "model" and loc[-1] == "scripted"


def test_an_acceptance_check_without_command_or_tool_is_refused() -> None:
    spec = example()
    spec["acceptance"].append({"expect": 1})
    assert locs(spec) == [("acceptance", 2)]


@pytest.mark.parametrize("field", ["task", "principal", "model"])
def test_a_missing_required_field_is_named(field: str) -> None:
    spec = example()
    del spec[field]
    assert locs(spec) == [(field,)]


def test_an_empty_task_is_refused() -> None:
    assert locs({**example(), "task": ""}) == [("task",)]


@pytest.mark.parametrize("name", ["rm -rf", "", "x" * 65, "a/b"])
def test_a_tool_name_the_model_api_cannot_take_is_refused(name: str) -> None:
    with pytest.raises(ValidationError) as err:
        ToolSpec(name=name, description="d", input_schema={}, read_only=True)
    assert [e["loc"] for e in err.value.errors()] == [("name",)]
