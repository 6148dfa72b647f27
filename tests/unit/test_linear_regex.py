"""A file check's regex (`matches:`) runs through RE2, in time linear in the text:
a pattern that makes a backtracking engine take seconds — `(a+)+$` doubles its
time with each added character under `re` — is answered at once; a pattern RE2
cannot match in linear time (backreferences, lookaround) or cannot read at all is
a spec problem naming the check, found when the spec is checked (by the CLI and
by the intake alike), not when the run is accepted."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from runlog import Log

from agentledger.schemas.spec import FileCheck, RunSpec
from agentledger.services.handlers import checks
from agentledger.services.handlers.linear_regex import BadPattern, pattern_problem, search
from agentledger.services.handlers.spec_check import spec_problems

CATASTROPHIC = "(a+)+$"


def spec_with(*acceptance: dict[str, Any]) -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": "t",
            "principal": {"id": "a", "tenant": "t"},
            "model": {"scripted": [{"end_turn": "done"}]},
            "acceptance": list(acceptance),
        }
    )


def test_the_catastrophic_pattern_is_answered_at_once_on_a_text_re_would_take_hours_on() -> None:
    text = "a" * 100 + "b"  # `re` would backtrack 2**100 times; 29 characters took it 22 s
    began = time.perf_counter()
    found = search(CATASTROPHIC, text)
    took = time.perf_counter() - began
    assert found is False
    assert took < 1.0  # expected well under 10 ms; a bound that cannot flake


def test_the_catastrophic_pattern_on_a_megabyte_costs_a_linear_scan() -> None:
    text = "a" * 1_000_000 + "!"
    began = time.perf_counter()
    assert search(CATASTROPHIC, text) is False
    assert search(r"a{3}!$", text) is True
    assert time.perf_counter() - began < 1.0


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        (r"^\d+ passed$", "12 passed", True),
        (r"^\d+ passed$", "12 passed\n", True),  # Python's `$` also before a final newline
        (r"^\d+ passed$", "12 passed\nmore", False),
        (r"(?m)^ok$", "first\nok\nlast", True),
        (r"(?P<n>\d+) items", "7 items", True),
        (r"colou?r", "color", True),
        (r"colou?r", "colr", False),
    ],
)
def test_a_pattern_finds_what_python_re_finds(pattern: str, text: str, found: bool) -> None:
    assert search(pattern, text) is found


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        (r"(a)\1", "linear time"),  # a backreference
        (r"foo(?=bar)", "linear time"),  # lookahead
        (r"(?<!x)y", "linear time"),  # lookbehind
        (r"a++", "linear time"),  # possessive
        (r"(unclosed", "not a valid regex: a '(' is never closed with ')'"),
        (r"[a-z", "not a valid regex: a '[' is never closed with ']'"),
        (r"*a", "not a valid regex: * repeats nothing"),
        (r"a{1001}", "not a valid regex: the count {1001} is not a valid repeat"),
    ],
)
def test_a_pattern_re2_cannot_match_in_linear_time_or_read_is_named_as_such(
    pattern: str, said: str
) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None and said in problem
    with pytest.raises(BadPattern):
        search(pattern, "anything")


def test_a_file_check_with_such_a_pattern_is_a_spec_problem_naming_the_check() -> None:
    spec = spec_with(
        {"file": "out.txt", "contains": "x"},
        {"file": "out.txt", "matches": r"^\d+ passed$"},
        {"file": "out.txt", "matches": r"(\w+) \1"},
    )
    [problem] = spec_problems(spec, None)
    assert problem.field == "acceptance.2.matches"
    assert "backreferences" in problem.reason


def test_the_file_check_matches_through_re2_and_a_bad_recorded_pattern_fails_the_check(
    tmp_path: Path,
) -> None:
    (tmp_path / "out.txt").write_text("a" * 60 + "\n")
    spec = spec_with({"file": "out.txt", "matches": CATASTROPHIC})
    state = Log.created(spec).s
    state = replace(state, workspace=str(tmp_path))
    began = time.perf_counter()
    verdict = checks.run_check(None, state, spec.acceptance[0])  # type: ignore[arg-type]
    assert time.perf_counter() - began < 1.0
    assert verdict.passed  # "a…a\n": `$` before the final newline, as `re` reads it
    # a run recorded before its patterns were checked: a failed check that says why
    old = FileCheck(file="out.txt", matches="(?=a)")
    verdict = checks.run_check(None, state, old)  # type: ignore[arg-type]
    assert not verdict.passed and "linear time" in verdict.evidence["reason"]
