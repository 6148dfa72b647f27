"""A flow's templates (`agentledger.events.flow_template`): filled in one pass, results
as data, unknown stages and keys refused by name, sizes bounded."""

from __future__ import annotations

import pytest

from agentledger.events.flow_template import (
    MAX_RENDERED_CHARS,
    MAX_VALUE_CHARS,
    TemplateError,
    reference_problem,
    references,
    render,
    render_input,
)

CTX = {
    "input": {"task": "fix it"},
    "fix": {"result": {"summary": "done", "branch": "b1", "n": 3, "deep": {"a": [1, 2]}},
            "outcome": "completed"},
}  # fmt: skip


def test_placeholders_are_filled_from_the_input_and_earlier_results() -> None:
    text = "Task {input.task}; {fix.result.summary} on {fix.result.branch} ({fix.outcome})"
    assert render(text, CTX) == "Task fix it; done on b1 (completed)"


def test_a_result_that_holds_a_template_is_data_never_rendered_again() -> None:
    ctx = {**CTX, "evil": {"result": {"summary": "{input.task} {{x}} {fix.result.branch}"}}}
    assert render("say {evil.result.summary}", ctx) == "say {input.task} {{x}} {fix.result.branch}"
    assert render_input({"a": "{evil.result.summary}"}, ctx) == {
        "a": "{input.task} {{x}} {fix.result.branch}"
    }


def test_escaped_braces_and_braces_around_other_things_stay_as_written() -> None:
    assert render('{{not}} {"json": 1} { spaced }', CTX) == '{not} {"json": 1} { spaced }'


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("{ghost.result}", "stage 'ghost' has no result yet"),
        ("{fix.result.nope}", "fix.result has no key 'nope'"),
        ("{fix.result.deep.a.7}", "fix.result.deep.a has no key '7'"),
        ("{fix.status}", "no 'status' of 'fix'"),
    ],
)
def test_a_placeholder_that_cannot_be_filled_is_refused_by_name(template: str, said: str) -> None:
    with pytest.raises(TemplateError, match=said.replace(".", r"\.")):
        render(template, CTX)


def test_a_huge_result_is_cut_and_a_huge_text_refused() -> None:
    ctx = {**CTX, "big": {"result": {"summary": "x" * (MAX_VALUE_CHARS * 3)}}}
    out = render("{big.result.summary}", ctx)
    assert len(out) < MAX_VALUE_CHARS + 100 and out.endswith("characters cut]")
    many = "{big.result.summary}" * (MAX_RENDERED_CHARS // MAX_VALUE_CHARS + 2)
    with pytest.raises(TemplateError, match="over"):
        render(many, ctx)


def test_a_whole_placeholder_argument_keeps_its_type() -> None:
    got = render_input(
        {"n": "{fix.result.n}", "d": "{fix.result.deep}", "s": "#{fix.result.n}"}, CTX
    )
    assert got == {"n": 3, "d": {"a": [1, 2]}, "s": "#3"}


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{later.result}", "no stage 'later'"),
        ("{input.spec}", "`input` has only `task`"),
        ("{fix.spend}", "not 'spend'"),
        ("{fix.outcome.x}", "has no keys"),
    ],
)
def test_a_template_naming_what_the_flow_cannot_have_is_found_before_it_runs(
    template: str, problem: str
) -> None:
    [parts] = references(template)
    found = reference_problem(parts, ["fix"])
    assert found is not None and problem in found
    assert reference_problem(("fix", "result", "a"), ["fix"]) is None
