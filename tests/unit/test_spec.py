"""The run spec a user writes by hand: the documented shape validates, and every
mistake is refused naming where it is (the pydantic error's `loc`), never
silently changing what a run does."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from agentledger.schemas.spec import (
    AnthropicModel,
    CommandCheck,
    FileCheck,
    Price,
    PythonCheck,
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


@pytest.mark.parametrize("model", [{"gemini": {"model": "x"}}, {}, "scripted"])
def test_a_model_without_a_provider_key_is_refused(model: Any) -> None:
    spec = {**example(), "model": model}
    with pytest.raises(ValidationError) as err:
        RunSpec.model_validate(spec)
    [error] = err.value.errors()
    assert error["loc"] == ("model",)
    assert "'scripted' or 'anthropic' or 'openai' or 'replay'" in error["msg"]


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


def test_budgets_and_policies_have_documented_defaults() -> None:
    spec = RunSpec.model_validate(example())
    assert spec.budgets.max_turns == 8 and spec.budgets.repeat_limit == 3
    assert spec.budgets.max_cost_usd is None and spec.budgets.max_wall_clock_s is None
    assert spec.policies.on_max_tokens == "continue"
    assert spec.policies.on_refusal == "escalate"
    assert spec.policies.approval_timeout_s == 3600.0
    assert spec.policies.cancel_grace_s == 5.0


def test_every_budget_and_policy_can_be_set() -> None:
    spec = example()
    spec["budgets"] = {
        "max_turns": 4,
        "max_input_tokens": 10_000,
        "max_output_tokens": 2_000,
        "max_cost_usd": 0.5,
        "max_wall_clock_s": 600,
        "max_consecutive_failures": 5,
        "tool_timeout_s": 20,
        "repeat_limit": 2,
        "prices": {"claude-x": {"input": 1, "output": 2}},
    }
    spec["policies"] = {
        "on_max_tokens": "fail",
        "on_refusal": "fail",
        "approval_timeout_s": 60,
        "cancel_grace_s": 0,
    }
    parsed = RunSpec.model_validate(spec)
    assert parsed.budgets.prices["claude-x"] == Price(input=1, output=2)
    assert parsed.policies.on_refusal == "fail" and parsed.budgets.repeat_limit == 2


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("budgets", "repeat_limit", 1),
        ("budgets", "max_cost_usd", 0),
        ("budgets", "max_wall_clock_s", -1),
        ("budgets", "max_input_tokens", 0),
        ("budgets", "max_consecutive_failures", 0),
        ("budgets", "tool_timeout_s", 0),
        ("policies", "on_max_tokens", "stop"),
        ("policies", "on_refusal", "ignore"),
        ("policies", "approval_timeout_s", 0),
        ("policies", "cancel_grace_s", -1),
    ],
)
def test_a_budget_or_policy_out_of_range_is_refused(section: str, key: str, value: Any) -> None:
    spec = example()
    spec.setdefault(section, {})[key] = value
    assert locs(spec) == [(section, key)]


def test_a_negative_price_is_refused() -> None:
    spec = example()
    spec["budgets"]["prices"] = {"m": {"input": -1, "output": 1}}
    assert locs(spec) == [("budgets", "prices", "m", "input")]


def test_file_and_python_checks_validate() -> None:
    spec = example()
    spec["acceptance"] = [
        {"file": "out.txt", "contains": "ok"},
        {"file": "out.txt", "matches": r"^\d+ passed$"},
        {"python": "checks.stock:enough"},
    ]
    file_contains, file_matches, python = RunSpec.model_validate(spec).acceptance
    assert file_contains == FileCheck(file="out.txt", contains="ok")
    assert isinstance(file_matches, FileCheck) and file_matches.matches == r"^\d+ passed$"
    assert python == PythonCheck(python="checks.stock:enough")


def test_a_file_check_with_nothing_to_check_is_refused() -> None:
    spec = example()
    spec["acceptance"] = [{"file": "out.txt"}]
    assert locs(spec) == [("acceptance", 0, "file")]


@pytest.mark.parametrize("target", ["checks.stock", "checks:", ":f", "a b:c", "1x:f"])
def test_a_python_check_that_is_not_module_colon_function_is_refused(target: str) -> None:
    spec = example()
    spec["acceptance"] = [{"python": target}]
    assert locs(spec) == [("acceptance", 0, "python", "python")]
