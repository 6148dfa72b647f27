"""The web view without JavaScript: the runs list and a run's page as text inside
`<noscript>`, escaped, evidence numbered from 1, what waits for a person with the
command that answers it."""

from __future__ import annotations

from typing import Any

from agentledger.services.entrypoints.web import plain

ROW = {"run_id": "r-1.s0", "status": "failed", "created_at": "2026-12-06T03:47:08.893Z",
       "duration_s": 1.0, "cost_usd": 0.0, "task": "Fix <b>it</b>"}  # fmt: skip
SUMMARY = {**ROW, "detail": "acceptance failed (1 of 1 check: …)", "principal": "bob", "turns": 1,
           "usage": {"input_tokens": 10, "output_tokens": 2}}  # fmt: skip


def view(**changes: Any) -> dict[str, Any]:
    return {
        "summary": SUMMARY,
        "calls": [{"call_id": "c1", "turn": 1, "name": "read", "input": {"p": "a"}, "status": "failed",
                   "output": None, "error": "ZeroDivisionError: division by zero"}],
        "checks": [{"index": 0, "number": 1, "check": "command 'pytest' exits 0", "passed": False,
                    "evidence": {"exit_code": 1, "stdout_tail": "F\nE   assert 2 == 3\n"},
                    "checked_at": "2026-12-06T03:47:09.894Z"}],
        "pending_approvals": [],
        "awaiting_human": None,
        **changes,
    }  # fmt: skip


def test_the_runs_list_is_text_with_a_link_to_each_run_and_nothing_unescaped() -> None:
    html = plain.runs_text([ROW])
    assert html.startswith("<noscript>") and html.endswith("</noscript>")
    assert '<a href="/runs/r-1.s0">r-1.s0</a>' in html
    assert "failed" in html and "&lt;b&gt;it&lt;/b&gt;" in html and "<b>it" not in html
    assert "No runs yet." in plain.runs_text([])


def test_a_runs_page_tells_its_status_detail_timeline_calls_and_evidence_numbered_from_1() -> None:
    timeline = [
        {"seq": 1, "type": "RunCreated", "line": "   1  …  RunCreated  task='Fix <b>it</b>'"}
    ]
    html = plain.run_text("r-1.s0", (view(), timeline))
    assert "run r-1.s0: failed</b> acceptance failed (1 of 1 check: …)" in html
    assert "RunCreated  task=&#x27;Fix &lt;b&gt;it&lt;/b&gt;&#x27;" in html
    assert "c1  turn 1  read({&quot;p&quot;: &quot;a&quot;})  failed  ZeroDivisionError" in html
    assert "1. FAIL command &#x27;pytest&#x27; exits 0" in html and "0. FAIL" not in html
    assert "     E   assert 2 == 3" in html  # a text of the evidence, a line a line


def test_what_waits_for_a_person_is_told_with_the_command_that_answers_it() -> None:
    asked = view(
        pending_approvals=[
            {"call_id": "w1", "name": "write", "input": {}, "reason": "writes need approval"}
        ],
        awaiting_human={"reason": "refusal", "detail": "the model refused"},
    )
    html = plain.run_text("r-1.s0", (asked, []))
    assert "agentledger approve|deny r-1.s0 w1" in html
    assert "waits for a person: the model refused — agentledger reply|resume|abort r-1.s0" in html


def test_an_unknown_run_is_said_so_escaped() -> None:
    assert "no run &#x27;r-&lt;x&gt;&#x27;" in plain.run_text("r-<x>", None)


def test_a_long_timeline_keeps_its_latest_lines() -> None:
    lines = [{"seq": i, "type": "T", "line": f"line {i}"} for i in range(plain.MOST_LINES + 5)]
    html = plain.run_text("r-1.s0", (view(), lines))
    assert (
        "… 5 earlier lines" in html
        and "line 4\n" not in html
        and f"line {plain.MOST_LINES + 4}" in html
    )
