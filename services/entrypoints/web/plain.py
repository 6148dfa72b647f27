"""The pages' text without JavaScript: the runs list and a run's page rendered on
the server, inside the page's `<noscript>` (a browser running the script never
shows it; one without, or `curl` with the token as a bearer, reads it). The same
values the script shows (`views`), already redacted, as plain lines: the rows
`agentledger runs` prints, and a run's summary, timeline (`tail`'s lines),
calls, acceptance evidence (numbered from 1) and what waits for a person, with
the command that answers it. Everything is HTML-escaped."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any

PLACE = "<!--noscript-->"  # where a page's text goes
MOST_LINES = 2000  # of a run's timeline: the latest ones


def runs_text(rows: Sequence[dict[str, Any]]) -> str:
    """The runs list as `agentledger runs` prints it, each run a link to its page."""
    if not rows:
        return _block("<p>No runs yet.</p>")
    lines = [
        f'<a href="/runs/{escape(r["run_id"])}">{escape(r["run_id"])}</a>  '
        + escape(
            f"{r['status']:<17} {r['created_at']}  {r['duration_s']:>8.1f}s  "
            f"${r['cost_usd']:<8.4f} {r['task'][:50]!r}"
        )
        for r in rows
    ]
    return _block(f"<pre>{chr(10).join(lines)}</pre>")


def run_text(run_id: str, found: tuple[dict[str, Any], list[dict[str, Any]]] | None) -> str:
    """One run's page as text: `found` is its view and timeline (`views`), None when
    there is no such run."""
    if found is None:
        return _block(f"<p>{escape(f'no run {run_id!r}')}</p>")
    view, timeline = found
    s = view["summary"]
    heading = f"run {run_id}: {s['status']}"
    parts = [
        f"<p><b>{escape(heading)}</b> {escape(s['detail'])}</p>",
        f"<p>{escape(_summary(s))}</p>",
        *_waiting(run_id, view),
        "<h2>Timeline</h2>",
        _pre([item["line"] for item in timeline], MOST_LINES),
        "<h2>Tool calls</h2>",
        _pre([_call(c) for c in view["calls"]]) if view["calls"] else "<p>none</p>",
        "<h2>Acceptance evidence</h2>",
        _pre([_check(k) for k in view["checks"]]) if view["checks"] else "<p>none yet</p>",
    ]
    return _block("\n".join(parts))


def _block(inner: str) -> str:
    return f'<noscript><div class="plain">\n{inner}\n</div></noscript>'


def _summary(s: dict[str, Any]) -> str:
    return (
        f"{s['task']} — principal {s['principal']}, {s['turns']} turn{'s' if s['turns'] != 1 else ''}, "
        f"${s['cost_usd']:.4f}, {s['usage']['input_tokens']}+{s['usage']['output_tokens']} tokens, "
        f"created {s['created_at']}"
    )


def _waiting(run_id: str, view: dict[str, Any]) -> list[str]:
    """What waits for a person, and the command that answers it (no buttons without a script)."""
    said = [
        f"call {c['call_id']} {c['name']} waits for approval: {c['reason']} — "
        f"agentledger approve|deny {run_id} {c['call_id']}"
        for c in view["pending_approvals"]
    ]
    if view["awaiting_human"]:
        said.append(
            f"waits for a person: {view['awaiting_human']['detail']} — "
            f"agentledger reply|resume|abort {run_id}"
        )
    return [f'<p class="wait">{escape(w)}</p>' for w in said]


def _call(c: dict[str, Any]) -> str:
    result = c["error"] if c["error"] is not None else json.dumps(c["output"], default=str)
    return f"{c['call_id']}  turn {c['turn']}  {c['name']}({json.dumps(c['input'], default=str)})  {c['status']}  {result}"


def _check(k: dict[str, Any]) -> str:
    """A check, numbered from 1, and its evidence a field a line (a text's lines indented)."""
    verdict = "PASS" if k["passed"] else "FAIL"
    lines = [f"{k['number']}. {verdict} {k['check']}  (at {k['checked_at']})"]
    for name, value in k["evidence"].items():
        if isinstance(value, str) and "\n" in value.strip():
            lines += [f"   {name}:", *(f"     {ln}" for ln in value.rstrip().splitlines())]
        else:
            shown = value if isinstance(value, str) else json.dumps(value, default=str)
            lines.append(f"   {name}: {shown}")
    return "\n".join(lines)


def _pre(lines: Sequence[str], most: int | None = None) -> str:
    left_out = len(lines) - most if most is not None and len(lines) > most else 0
    shown = (
        [f"… {left_out} earlier lines (agentledger tail --run shows them all)"] if left_out else []
    )
    shown += lines[left_out:]
    return f"<pre>{escape(chr(10).join(shown))}</pre>"
