"""A spec's mistakes are told in a person's words, each with its line: no phrase
of pydantic's ("Input should be", "Field required", "Tuple should have at least
1 item") reaches the user; a typo of a check's or the model's own key (`comand:`)
says which key it may mean; a file check's regex RE2 refuses is named with the
schema's problems, at once, with a plain reason; a tool check's `input` is
refused in the same words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from handlerkit import toolset

from agentledger.schemas.errors import InvalidSpec, SpecProblem
from agentledger.schemas.spec import RunSpec
from agentledger.services.entrypoints.cli.spec_file import load_spec_file
from agentledger.services.handlers.spec_check import spec_problems

HEAD = "task: count\nprincipal: {id: a, tenant: t}\n"
SCRIPT = "model: {scripted: [{end_turn: done}]}\n"

# one mistake each, as a newcomer writes them
BAD = {
    "task_a_number": "task: 5\nprincipal: {id: a, tenant: t}\n" + SCRIPT,
    "task_empty": "task: ''\nprincipal: {id: a, tenant: t}\n" + SCRIPT,
    "task_a_list": "task: [a, b]\nprincipal: {id: a, tenant: t}\n" + SCRIPT,
    "no_task": "principal: {id: a, tenant: t}\n" + SCRIPT,
    "principal_text": "task: t\nprincipal: alice\n" + SCRIPT,
    "principal_without_id": "task: t\nprincipal: {tenant: t}\n" + SCRIPT,
    "scope_a_number": "task: t\nprincipal: {id: a, tenant: t, scopes: [1]}\n" + SCRIPT,
    "empty_script": HEAD + "model: {scripted: []}\n",
    "one_bad_turn": HEAD + "model: {scripted: [{}]}\n",
    "turn_as_text": HEAD + "model: {scripted: [done]}\n",
    "tool_use_empty": HEAD + "model: {scripted: [{tool_use: []}]}\n",
    "call_without_name": HEAD + "model: {scripted: [{tool_use: [{id: c1}]}]}\n",
    "call_input_a_list": HEAD
    + "model: {scripted: [{tool_use: [{id: c1, name: x, input: [1]}]}]}\n",
    "delay_negative": HEAD + "model: {scripted: [{end_turn: x, delay_s: -1}]}\n",
    "delay_text": HEAD + "model: {scripted: [{end_turn: x, delay_s: soon}]}\n",
    "stop_reason_typo": HEAD + "model: {scripted: [{end_turn: x, stop_reason: max_token}]}\n",
    "model_text": HEAD + "model: claude\n",
    "model_typo": HEAD + "model: {scriptd: []}\n",
    "anthropic_text": HEAD + "model: {anthropic: claude}\n",
    "anthropic_without_model": HEAD + "model: {anthropic: {}}\n",
    "max_tokens_text": HEAD + "model: {anthropic: {model: m, max_tokens: lots}}\n",
    "max_tokens_fraction": HEAD + "model: {anthropic: {model: m, max_tokens: 1.5}}\n",
    "temperature_high": HEAD + "model: {anthropic: {model: m, temperature: 3}}\n",
    "server_tool_type": HEAD
    + "model: {anthropic: {model: m, server_tools: [{name: w, type: Web Search}]}}\n",
    "thinking_text": HEAD + "model: {anthropic: {model: m, thinking: enabled}}\n",
    "budgets_text": HEAD + SCRIPT + "budgets: lots\n",
    "max_turns_zero": HEAD + SCRIPT + "budgets: {max_turns: 0}\n",
    "max_turns_text": HEAD + SCRIPT + "budgets: {max_turns: eight}\n",
    "max_turns_huge": HEAD + SCRIPT + "budgets: {max_turns: 1000000}\n",
    "cost_zero": HEAD + SCRIPT + "budgets: {max_cost_usd: 0}\n",
    "price_without_output": HEAD + SCRIPT + "budgets: {prices: {m: {input: 1}}}\n",
    "prices_a_list": HEAD + SCRIPT + "budgets: {prices: [1]}\n",
    "policy_unknown": HEAD + SCRIPT + "policies: {on_refusal: ignore}\n",
    "tools_text": HEAD + SCRIPT + "tools: inventory_tools\n",
    "tool_path_number": HEAD + SCRIPT + "tool_path: 5\n",
    "queue_with_spaces": HEAD + SCRIPT + "queue: no spaces!\n",
    "copy_workspace_maybe": HEAD + SCRIPT + "copy_workspace: maybe\n",
    "acceptance_text": HEAD + SCRIPT + "acceptance: 'true'\n",
    "acceptance_key_typo": HEAD + SCRIPT + "acceptance:\n  - comand: 'true'\n",
    "acceptance_empty_check": HEAD + SCRIPT + "acceptance: [{}]\n",
    "acceptance_item_text": HEAD + SCRIPT + "acceptance: ['true']\n",
    "file_check_without_file": HEAD + SCRIPT + "acceptance: [{contains: x}]\n",
    "file_check_nothing_to_check": HEAD + SCRIPT + "acceptance: [{file: x}]\n",
    "python_check_no_colon": HEAD + SCRIPT + "acceptance: [{python: mod.fn}]\n",
    "tool_check_without_expect": HEAD + SCRIPT + "acceptance: [{tool: x}]\n",
    "command_as_list": HEAD + SCRIPT + "acceptance: [{command: [ls, -l]}]\n",
    "command_timeout_zero": HEAD + SCRIPT + "acceptance: [{command: 'true', timeout_s: 0}]\n",
    "command_timeout_typo": HEAD + SCRIPT + "acceptance: [{command: 'true', timout_s: 3}]\n",
    "context_small": HEAD + SCRIPT + "context: {budget_tokens: 10}\n",
    "secret_name": HEAD + SCRIPT + "secrets: [not-a-var]\n",
    "secrets_text": HEAD + SCRIPT + "secrets: TOKEN\n",
    "keep_secrets_sometimes": HEAD + SCRIPT + "keep_secrets_in_log: sometimes\n",
}

PYDANTIC = re.compile(
    r"should be|should have|field required|input should|tuple should|list should|string should"
    r"|extra inputs|valid dictionary|valid string|valid integer|valid number|valid boolean"
    r"|instance of|after validation|unable to (parse|interpret)|value error",
    re.IGNORECASE,
)


def problems(tmp_path: Path, text: str) -> list[SpecProblem]:
    (tmp_path / "spec.yaml").write_text(text)
    with pytest.raises(InvalidSpec) as refused:
        load_spec_file(str(tmp_path / "spec.yaml"))
    return list(refused.value.problems)


@pytest.mark.parametrize("text", BAD.values(), ids=BAD.keys())
def test_no_phrase_of_pydantic_reaches_the_user_and_every_problem_has_its_line(
    tmp_path: Path, text: str
) -> None:
    found = problems(tmp_path, text)
    assert found
    for p in found:
        assert not PYDANTIC.search(p.reason), str(p)
        assert p.line is not None, str(p)


@pytest.mark.parametrize(
    ("mistake", "said"),
    [
        ("max_turns_zero", "budgets.max_turns: must be at least 1; got 0"),
        ("max_turns_text", "budgets.max_turns: must be a whole number; got 'eight'"),
        ("cost_zero", "budgets.max_cost_usd: must be more than 0; got 0"),
        ("task_empty", "task: must not be empty; got ''"),
        ("empty_script", "model.scripted: needs at least 1 item; got []"),
        ("copy_workspace_maybe", "copy_workspace: must be true or false; got 'maybe'"),
        (
            "thinking_text",
            "model.anthropic.thinking: must be a mapping ({key: value, …}); got 'enabled'",
        ),
        ("policy_unknown", "policies.on_refusal: must be 'escalate' or 'fail'; got 'ignore'"),
        ("python_check_no_colon", "acceptance.0.python: a python check is module:function"),
        ("queue_with_spaces", "queue: a queue name is letters, digits, '.', '_' or '-'"),
    ],
)
def test_each_kind_of_mistake_is_said_plainly(tmp_path: Path, mistake: str, said: str) -> None:
    assert any(str(p).startswith(said) for p in problems(tmp_path, BAD[mistake]))


def test_a_typo_of_a_checks_own_key_says_did_you_mean_with_the_line_of_the_typo(
    tmp_path: Path,
) -> None:
    [p] = problems(tmp_path, BAD["acceptance_key_typo"])
    assert p.field == "acceptance.0.comand" and p.line == 5
    assert p.reason.startswith("unknown key (did you mean 'command'?")
    assert "'command', 'tool', 'file' or 'python'" in p.reason


def test_a_typo_of_the_models_own_key_says_did_you_mean(tmp_path: Path) -> None:
    [p] = problems(tmp_path, BAD["model_typo"])
    assert p.field == "model.scriptd" and p.line == 3
    assert p.reason.startswith("unknown key (did you mean 'scripted'?")


def test_a_check_with_another_kinds_keys_but_not_its_own_names_the_key_it_needs(
    tmp_path: Path,
) -> None:
    [p] = problems(tmp_path, BAD["file_check_without_file"])
    assert p.field == "acceptance.0"
    assert p.reason.startswith("needs the key 'file' ('contains' goes with it)")


def test_a_list_whose_only_item_is_refused_is_not_also_called_empty(tmp_path: Path) -> None:
    found = problems(tmp_path, BAD["one_bad_turn"])
    assert [p.field for p in found] == ["model.scripted.0"]


def test_a_bad_regex_is_named_with_its_line_and_a_plain_reason_beside_the_schema_problems(
    tmp_path: Path,
) -> None:
    found = problems(
        tmp_path,
        HEAD + SCRIPT + "budget: {max_turns: 3}\n"  # line 4: a schema problem
        "acceptance:\n"
        "  - file: out.txt\n"
        "    matches: '([a-z'\n"  # line 7
        "  - {file: out.txt, matches: '*a'}\n",  # line 8
    )
    said = {(p.line, str(p)) for p in found}
    assert (
        4,
        "budget: unknown key (did you mean 'budgets'? the keys here are "
        + ", ".join(RunSpec.model_fields)
        + ")",
    ) in said
    assert (
        7,
        "acceptance.0.matches: not a valid regex: a '[' is never closed with ']' ([a-z)",
    ) in said
    assert (
        8,
        "acceptance.1.matches: not a valid regex: * repeats nothing: put what it repeats before it",
    ) in said


def test_a_tool_checks_input_is_refused_in_the_same_plain_words() -> None:
    spec = RunSpec.model_validate(
        {
            "task": "t",
            "principal": {"id": "a", "tenant": "t"},
            "model": {"scripted": [{"end_turn": "done"}]},
            "tools": ["unit_tools"],
            "acceptance": [{"tool": "kv_read", "input": {"key": 5, "colour": "red"}, "expect": {}}],
        }
    )
    [p] = spec_problems(spec, None, toolset=toolset())
    assert p.field == "acceptance.0.input"
    assert p.reason == "key: must be text, got 5; colour: unknown key"
