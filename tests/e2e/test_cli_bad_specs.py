"""A spec with a mistake is refused before anything is recorded: exit code 2,
the field named on stderr, no run in the log and no workspace copy."""

from __future__ import annotations

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


@pytest.mark.parametrize(
    ("mistake", "field", "reason"),
    [
        (unknown_top_level_key, "budget", "Extra inputs are not permitted"),
        (unknown_nested_key, "principal.scope", "Extra inputs are not permitted"),
        (
            turn_with_tool_use_and_end_turn,
            "model.scripted",
            "exactly one of 'tool_use', 'end_turn' or 'refusal'",
        ),
        (zero_max_turns, "budgets.max_turns", "greater than or equal to 1"),
        (missing_tool_module, "tools.0", "'no_such_tools'"),
        (acceptance_tool_that_writes, "acceptance.1.tool", "not read-only"),
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
    assert f"invalid spec: {field}" in done.stderr
    assert reason in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert cli.runs() == []
    workspaces = tmp_path / ".agentledger" / "workspaces"
    assert not workspaces.exists() or not any(workspaces.iterdir())


def test_a_spec_file_that_does_not_exist_exits_2(cli: Cli) -> None:
    done = cli("run", "nowhere.yaml")
    assert done.returncode == 2
    assert "nowhere.yaml" in done.stderr
    assert "Traceback" not in done.stderr
