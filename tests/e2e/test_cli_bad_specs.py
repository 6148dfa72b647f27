"""A spec with mistakes is refused before anything is recorded: exit code 2,
every problem at once on stderr (with `--json`, also as a list on stdout),
each with its field, a plain reason and its line in the file; no run in the
log and no workspace copy."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2ekit import Cli, copy_example

Spec = dict[str, Any]


def unknown_top_level_key(spec: Spec) -> None:
    spec["budget"] = spec.pop("budgets")


def unknown_nested_key(spec: Spec) -> None:
    spec["principal"]["scope"] = spec["principal"].pop("scopes")


def turn_with_tool_use_and_end_turn(spec: Spec) -> None:
    spec["model"]["scripted"][0]["end_turn"] = "done already"


def zero_max_turns(spec: Spec) -> None:
    spec["budgets"]["max_turns"] = 0


def missing_tool_module(spec: Spec) -> None:
    spec["tools"] = ["no_such_tools"]


def acceptance_tool_that_writes(spec: Spec) -> None:
    spec["acceptance"][1] = {
        "tool": "reserve_stock",
        "input": {"sku": "A1", "qty": 1},
        "expect": {},
    }


def text_for_the_scopes(spec: Spec) -> None:
    spec["principal"]["scopes"] = "stock:read"


def a_number_for_a_script(spec: Spec) -> None:
    spec["model"] = {"scripted": 5}


def typo_of_a_checks_key(spec: Spec) -> None:
    spec["acceptance"][0] = {"comand": spec["acceptance"][0]["command"]}


@pytest.mark.parametrize(
    ("mistake", "field", "reason"),
    [
        (unknown_top_level_key, "budget", "unknown key (did you mean 'budgets'?"),
        (unknown_nested_key, "principal.scope", "unknown key (did you mean 'scopes'?"),
        (
            turn_with_tool_use_and_end_turn,
            "model.scripted.0",
            "a scripted turn has exactly one of 'tool_use', 'end_turn' or 'refusal'",
        ),
        (zero_max_turns, "budgets.max_turns", "must be at least 1; got 0"),
        (missing_tool_module, "tools.0", "'no_such_tools'"),
        (acceptance_tool_that_writes, "acceptance.1.tool", "not read-only"),
        (a_number_for_a_script, "model.scripted", "a scripted model is a list of turns"),
        (text_for_the_scopes, "principal.scopes", "must be a list; got 'stock:read'"),
        (typo_of_a_checks_key, "acceptance.0.comand", "unknown key (did you mean 'command'?"),
    ],
    ids=lambda v: v.__name__ if callable(v) else None,
)
def test_a_bad_spec_exits_2_naming_the_field_and_records_nothing(
    cli: Cli, tmp_path: Path, mistake: Callable[[Spec], None], field: str, reason: str
) -> None:
    example = copy_example("inventory", tmp_path)
    spec = yaml.safe_load((example / "spec.yaml").read_text())
    mistake(spec)
    (example / "bad.yaml").write_text(yaml.safe_dump(spec))

    done = cli("run", example / "bad.yaml")

    assert done.returncode == 2, done.stdout + done.stderr
    assert f"invalid spec: {example / 'bad.yaml'}:" in done.stderr
    [said] = [ln for ln in done.stderr.splitlines() if f": {field}: " in ln]
    assert reason in said
    assert "Input should be" not in done.stderr and "should be" not in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert cli.runs() == []
    workspaces = cli.state_dir / "workspaces"
    assert not workspaces.exists() or not any(workspaces.iterdir())


def test_every_problem_is_named_at_once_with_its_line(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "task: count\n"  # line 1
        "budget: {max_turns: 3}\n"  # 2: unknown key
        "model:\n"  # 3
        "  scripted: 5\n"  # 4: not a list of turns
        "policies: {on_refusal: ignore}\n"  # 5: not one of escalate, fail
        "task: count again\n"  # 6: given twice
    )

    done = cli("run", "--json", tmp_path / "bad.yaml")

    assert done.returncode == 2
    error = json.loads(done.stdout)
    assert error["error"] == "invalid spec" and error["exit_code"] == 2
    found = {(p["field"], p["line"]) for p in error["problems"]}
    assert found == {
        ("principal", 1),  # required; the line of the mapping that lacks it
        ("budget", 2),
        ("model.scripted", 4),
        ("policies.on_refusal", 5),
        ("task", 6),
    }
    assert "5 problems" in done.stderr
    assert "line 5: policies.on_refusal: must be 'escalate' or 'fail'; got 'ignore'" in done.stderr
    assert "given twice (lines 1 and 6)" in done.stderr


def test_a_yaml_error_names_the_file_and_the_line(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("task: fine\nprincipal: {id: a\nmodel: x\n")
    done = cli("submit", tmp_path / "broken.yaml")
    assert done.returncode == 2
    assert f"{tmp_path / 'broken.yaml'}:3: not valid YAML" in done.stderr
    assert "<unicode string>" not in done.stderr and "Traceback" not in done.stderr


def test_a_spec_file_that_does_not_exist_exits_2(cli: Cli) -> None:
    done = cli("run", "nowhere.yaml")
    assert done.returncode == 2
    assert "nowhere.yaml" in done.stderr
    assert "Traceback" not in done.stderr


LAUGHS = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]"
            for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
        ),
        "task: *i",
        "principal: {id: a, tenant: t}",
        "model:",
        "  scripted: [{end_turn: done}]",
    ]
)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (LAUGHS, "with its aliases written out it is over 8,388,608 bytes (the limit)"),
        ("task: " + "[" * 5000 + "]" * 5000, "nested deeper than 64 (the limit)"),
    ],
    ids=["alias_bomb", "nested_brackets"],
)
def test_a_spec_past_the_parsing_limits_exits_2_at_once_naming_the_limit(
    cli: Cli, tmp_path: Path, text: str, said: str
) -> None:
    (tmp_path / "bad.yaml").write_text(text)

    done = cli("run", tmp_path / "bad.yaml")  # a hang would end at the command's timeout

    assert done.returncode == 2, done.stderr
    assert said in done.stderr and f"{tmp_path / 'bad.yaml'}:" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert cli.runs() == []


def test_an_endless_file_as_a_spec_exits_2_at_the_size_limit(cli: Cli) -> None:
    done = cli("submit", "/dev/zero")
    assert done.returncode == 2
    assert "/dev/zero: larger than 8,388,608 bytes (the limit)" in done.stderr


def test_a_regex_re2_cannot_match_in_linear_time_is_a_spec_error_with_its_line(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "bad.yaml").write_text(
        "task: count\n"
        "principal: {id: a, tenant: t}\n"
        "model: {scripted: [{end_turn: done}]}\n"
        "acceptance:\n"
        "  - {file: out.txt, matches: '(a+)+$'}\n"  # fine under RE2: linear
        "  - file: out.txt\n"
        "    matches: '(\\w+) \\1'\n"  # line 7
    )
    done = cli("run", tmp_path / "bad.yaml")
    assert done.returncode == 2
    assert ":7: acceptance.1.matches: invalid escape sequence: \\1" in done.stderr
    assert cli.runs() == []
