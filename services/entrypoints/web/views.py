"""What the web view shows, as JSON-ready values: the runs list (the rows `agentledger
runs` prints) and one run's page: its summary, timeline lines (`describe.line`,
as `tail` prints them), calls, the locks they hold and waited for, acceptance
evidence (`index` as its event has it, from 0; `number` as a person counts, from 1),
what waits for a person. Everything passes the run's redactor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentledger.events.state import Check, RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import ApprovalRequested, ToolCallScheduled, ToolCallWaiting
from agentledger.schemas.envelope import Envelope
from agentledger.services.entrypoints.describe import line
from agentledger.services.entrypoints.run_index import page_of_runs, parse_time
from agentledger.services.entrypoints.summary import iso, run_summary
from agentledger.services.handlers.state_cache import cache_for
from agentledger.services.secrets import redactor_for
from agentledger.services.session import Session

HOLDING = (CallStatus.SCHEDULED, CallStatus.STARTED)
MOST_SCANNED = 2000  # runs a page of a search looks at: a rare match goes on on the next page


def statuses(text: str) -> frozenset[RunStatus]:
    """A comma list of statuses from a query string; ValueError naming an unknown one."""
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = sorted(n for n in names if n not in RunStatus._value2member_map_)
    if unknown:
        known = ", ".join(s.value for s in RunStatus)
        raise ValueError(f"no status {unknown[0]!r}; the statuses are {known}")
    return frozenset(RunStatus(n) for n in names)


@dataclass(frozen=True, slots=True)
class RunFilter:
    """What the runs list asks for: statuses (any when empty), text in the run id
    or task, a tenant, a tool the run called, created within [since, until)."""

    status: frozenset[RunStatus] = frozenset()
    text: str = ""
    tenant: str = ""
    tool: str = ""
    since: float | None = None
    until: float | None = None

    def keep(self, state: RunState) -> bool:
        wanted = self.text.strip().lower()
        if wanted and wanted not in state.run_id.lower() and wanted not in state.spec.task.lower():
            return False
        if self.tenant and state.spec.principal.tenant != self.tenant:
            return False
        return not self.tool or any(c.name == self.tool for t in state.turns for c in t.calls)


def filter_of(query: Mapping[str, str]) -> RunFilter:
    """The runs list's filter from a query string (status, q, tenant, tool, since,
    until: times as `agentledger runs` takes them); ValueError naming what is wrong."""
    since, until = query.get("since", "").strip(), query.get("until", "").strip()
    return RunFilter(
        statuses(query.get("status", "")), query.get("q", ""), query.get("tenant", "").strip(),
        query.get("tool", "").strip(), parse_time(since) if since else None,
        parse_time(until) if until else None,
    )  # fmt: skip


def runs_page(
    session: Session, wanted: RunFilter, *, limit: int, token: str | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the runs `wanted` names, newest first (archived ones included when
    the archive lists them), and the token of the next page (None: no more). A
    page looks at MOST_SCANNED runs at most: a search may give a short page and a
    token to go on with."""
    page = page_of_runs(
        session.reader, lambda ids: cache_for(session.store).load_many(ids),
        statuses=wanted.status, since=wanted.since, until=wanted.until, limit=limit,
        token=token, keep=wanted.keep, most_scanned=MOST_SCANNED,
    )  # fmt: skip
    return [_row(s) for s in page.states], page.next_token


def _row(state: RunState) -> dict[str, Any]:
    row = run_summary(state) | {"tenant": state.spec.principal.tenant}
    return dict(redactor_for(state.spec).value(row))


def runs_list(
    session: Session, *, status: frozenset[RunStatus], text: str, limit: int
) -> list[dict[str, Any]]:
    """The newest runs (filtered by status, and by text in their id or task)."""
    return runs_page(session, RunFilter(status, text), limit=limit)[0]


def timeline(envelopes: Sequence[Envelope[Any]], state: RunState) -> list[dict[str, Any]]:
    redactor = redactor_for(state.spec)
    return [{"seq": e.seq, "type": e.type, "line": redactor.text(line(e))} for e in envelopes]


def run_view(state: RunState, envelopes: Sequence[Envelope[Any]]) -> dict[str, Any]:
    """The run's page apart from its timeline; `envelopes` is its whole log."""
    waited, held, asked = _lock_and_approval_notes(envelopes)
    calls: list[dict[str, Any]] = [
        {
            "call_id": c.call_id, "turn": c.turn, "name": c.name, "input": c.input,
            "status": str(c.status), "read_only": c.read_only,
            "reads": list(c.reads), "writes": list(c.writes),
            "locks_held": held.get(c.call_id, {}) if c.status in HOLDING else {},
            "locks_waited": sorted(waited.get(c.call_id, ())),
            "output": c.output if c.status is CallStatus.SUCCEEDED else None,
            "error": c.error.message if c.error else None,
        }
        for t in state.turns for c in t.calls
    ]  # fmt: skip
    pending = [
        {"call_id": c["call_id"], "name": c["name"], "input": c["input"],
         "reason": asked.get(c["call_id"], ""),
         "expires_at": iso(_call_expiry(state, c["call_id"]))}
        for c in calls if c["status"] == CallStatus.AWAITING_APPROVAL
    ]  # fmt: skip
    view = {
        "summary": run_summary(state),
        "calls": calls,
        "checks": [_check_view(k) for k in state.checks],
        "pending_approvals": pending,
        "awaiting_human": (
            {"reason": state.escalated_for, "detail": state.detail}
            if state.status is RunStatus.AWAITING_HUMAN
            else None
        ),  # fmt: skip
        "seq": state.seq,
    }
    return dict(redactor_for(state.spec).value(view))


def _lock_and_approval_notes(
    envelopes: Sequence[Envelope[Any]],
) -> tuple[dict[str, set[str]], dict[str, dict[str, int]], dict[str, str]]:
    """From the log: what each call waited for, the tokens it was scheduled with, and
    why it asked for approval."""
    waited: dict[str, set[str]] = {}
    held: dict[str, dict[str, int]] = {}
    asked: dict[str, str] = {}
    for env in envelopes:
        match env.data:
            case ToolCallWaiting(call_id=call_id, waiting_for=resources):
                waited.setdefault(call_id, set()).update(resources)
            case ToolCallScheduled(call_id=call_id, tokens=tokens):
                held[call_id] = dict(tokens)
            case ApprovalRequested(call_id=call_id, reason=reason):
                asked[call_id] = reason
    return waited, held, asked


def _check_view(k: Check) -> dict[str, Any]:
    return {
        "index": k.index,
        "number": k.index + 1,
        "check": k.check,
        "passed": k.passed,
        "evidence": k.evidence,
        "checked_at": iso(k.checked_at),
    }


def _call_expiry(state: RunState, call_id: str) -> float | None:
    call = state.call(call_id)
    return call.approval_expires_at if call else None
