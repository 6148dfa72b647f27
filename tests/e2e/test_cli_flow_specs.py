"""A newcomer's typical mistakes in a flow, each refused by `agentledger run` before
anything runs with one line (exit 2) naming where and what is wrong."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2ekit import Cli, copy_example

Edit = Callable[[dict[str, Any]], None]


def _set(path: tuple[Any, ...], value: Any) -> Edit:
    def edit(spec: dict[str, Any]) -> None:
        node = spec
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


def _drop_id(spec: dict[str, Any]) -> None:
    del spec["flow"][2]["id"]


CASES: list[tuple[str, Edit, str]] = [
    ("unknown stage in on", _set(("flow", 1, "on", "failed"), "fixx"),
     ": flow: stage 'fix': failed leads to 'fixx', which is no stage of the flow"),
    ("a later stage in a template", _set(("flow", 0, "agent", "task"), "see {verify.result.tail}"),
     "flow.0.agent.task: {verify.result.tail}: stage 'verify' is not before this one"),
    ("an unregistered tool", _set(("flow", 2, "call", "tool"), "verify_testz"),
     "flow.2.call.tool: no tool 'verify_testz' in the flow's tool set"),
    ("both agent and call", _set(("flow", 2, "agent"), {"task": "x"}),
     "flow.2: stage 'verify' needs exactly one of 'agent', 'call' or 'human'"),
    ("a missing id", _drop_id, "flow.2.id: required: its name, unique in the flow"),
    ("max_loops 0 with a route back", _set(("max_loops",), 0),
     "max_loops: 0 allows no route back, but stage 'verify' routes failed back to 'fix'"),
    ("an unclosed placeholder", _set(("flow", 3, "human", "question"), "Merge {fix.result.branch?"),
     "flow.3.human.question: {fix.…: a placeholder left unclosed or malformed"),
    ("an outcome a gate has not", _set(("flow", 3, "on", "ok"), "merge"),
     "no outcome 'ok' for a human stage (its outcomes: approved, denied, replied)"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_flow_mistake_is_one_line_naming_it(
    cli: Cli, tmp_path: Path, edit: Edit, says: str
) -> None:
    copy_example("fix_tests", tmp_path)
    path = copy_example("flow", tmp_path) / "spec.yaml"
    spec = yaml.safe_load(path.read_text())
    for stage in spec["flow"]:  # YAML 1.1 reads a bare on: as true
        if True in stage:
            stage["on"] = stage.pop(True)
    edit(spec)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    done = cli("run", path)
    assert done.returncode == 2, done.stderr
    [line] = [x for x in done.stderr.splitlines() if "invalid spec" in x]
    assert says in line, line
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
