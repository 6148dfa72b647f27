"""Read-only commands: status, runs, replay (`tail` is `tail_cmds`). What they
print is redacted (`agentledger.services.entrypoints.cli.redacted`); `agentledger raw` is
the one way to the stored bytes."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from agentledger.events.commands import Pool
from agentledger.events.counted import counted
from agentledger.events.errors import CoreError
from agentledger.events.fold import apply
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.schemas.errors import InvalidEvent
from agentledger.services.adapters.inbox.port import Liveness, WaitingRequest
from agentledger.services.clock import RUN_ID_WIDTH
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.cli.embedded import attach_command, embedded_here
from agentledger.services.entrypoints.cli.parser import BadOption
from agentledger.services.entrypoints.describe import line
from agentledger.services.entrypoints.flow_tree import flow_tree, tree_lines
from agentledger.services.entrypoints.reply import emit, fail, say
from agentledger.services.entrypoints.run_index import BadPageToken, Page, page_of_runs, parse_time
from agentledger.services.entrypoints.summary import run_summary, waits_line
from agentledger.services.handlers.state_cache import cache_for
from agentledger.services.redis_urls import masked
from agentledger.services.secrets import redactor_for
from agentledger.services.session import Session

# what `status` says of a run whose request waits in the inbox: not a RunStatus (the run
# does not exist yet), and not ended (exit 9)
AWAITING_INTAKE = "awaiting_intake"


def unserved(session: Session, state: RunState) -> str | None:
    """Why a live run is not moving, when no worker of its task queue and tool
    set is alive: it waits for one (`agentledger workers --queue …`)."""
    if not state.status.live or state.status.waiting:
        return None
    if any(session.admin.live(state.queue, state.toolset, pool) for pool in Pool):
        return None
    if embedded_here(state, session.settings):
        return (
            f"no process serves this embedded run: `{attach_command(state.run_id)}` goes on with it"
        )
    return f"no worker serves queue {state.queue!r} with tool set {state.toolset}"


def status(session: Session, run_id: str, *, as_json: bool) -> int:
    """A run's state (exit: its status's code); for a request still in the inbox,
    that it waits for the intake (exit 9: not ended)."""
    state = session.load(run_id)
    if state is None:
        path = session.settings.publishers_path
        if (request := session.inbox.request_waiting(run_id, path)) is not None:
            return _awaiting_intake(session, request, as_json=as_json)
        return fail(exit_codes.USAGE, "no run", _no_run(session, run_id), as_json)
    redact = redactor_for(state.spec)
    summary = redact.value(run_summary(state))
    if (waiting := unserved(session, state)) is not None:
        summary["waiting_for"] = waiting
    if (origin := state.spec.branch) is not None:
        summary["branch_of"] = {"run_id": origin.run_id, "turn": origin.turn}
    if (tree := flow_tree(state, session.load)) is not None:
        tree = redact.value(tree)  # results and the gate's evidence too
        summary["flow" if state.flow is not None else "children"] = tree
    if as_json:
        emit(summary)
    else:
        _print_status(state, summary, waiting, tree)
    return exit_codes.for_status(state.status)


def _print_status(
    state: RunState, summary: dict[str, Any], waiting: str | None, tree: dict[str, Any] | None
) -> None:
    origin = state.spec.branch
    print(
        f"run {state.run_id}: {state.status}  (seq {state.seq}, {counted(state.turns_used, 'turn')})"
    )
    print(f"  task: {summary['task']!r}  principal: {summary['principal']}")
    if origin is not None:
        print(
            f"  branch of {origin.run_id} from turn {origin.turn} (its turns before are that run's)"
        )
    took = f"{summary['duration_s']:.1f}s" + ("" if state.status.terminal else " so far")
    print(f"  created {summary['created_at']}, {took}; cost ${summary['cost_usd']:.4f}")
    if summary["detail"]:
        print(f"  {summary['detail']}")
    if waiting is not None:
        print(f"  waiting: {waiting}")
    for row in tree_lines(tree) if tree is not None else []:
        print(row)
    for call in summary["tool_calls"]:
        waits = f"  {waits_line(call['waits'])}" if "waits" in call else ""
        print(f"  {call['call_id']:<12} {call['name']:<24} {call['status']}{waits}")


def _awaiting_intake(session: Session, waiting: WaitingRequest, *, as_json: bool) -> int:
    if waiting.taken:
        detail = f"the intake took its request {waiting.age_s:.1f}s ago and is creating the run"
    else:
        detail = (
            f"waiting for the intake: its request is in the inbox (published as "
            f"{waiting.publisher!r} {waiting.age_s:.1f}s ago)"
        )
        live = session.inbox.intake_liveness(
            ttl_s=session.settings.member_ttl_s, publisher=waiting.publisher
        )
        if live is Liveness.NONE:
            where = f"{masked(session.located.url)} (prefix {session.settings.prefix!r})"
            detail += f"; no intake reads the inbox on {where}: start `agentledger intake` there"
    if as_json:
        emit({
            "run_id": waiting.run_id, "status": AWAITING_INTAKE, "detail": detail,
            "publisher": waiting.publisher, "entry_id": waiting.entry_id, "taken": waiting.taken,
        })  # fmt: skip
    else:
        print(f"run {waiting.run_id}: {AWAITING_INTAKE}")
        print(f"  {detail}")
    return exit_codes.STILL_LIVE


def _no_run(session: Session, run_id: str) -> str:
    """There is no such run; if the intake refused a request for it, what it said."""
    refused = session.inbox.refusal_of_run(run_id)
    if refused is None:
        return f"no run {run_id!r}"
    reason, publisher = refused
    return (
        f"no run {run_id!r}: the intake refused its request (published as {publisher!r}): {reason}"
    )


@dataclass(frozen=True, slots=True)
class RunsQuery:
    statuses: frozenset[RunStatus]
    since: float | None
    until: float | None
    limit: int
    page: str | None

    @classmethod
    def of(cls, args: argparse.Namespace) -> RunsQuery:
        """From the arguments of `runs`; BadOption naming the option it cannot use."""
        names = {n.strip() for s in args.statuses or [] for n in s.split(",") if n.strip()}
        unknown = sorted(n for n in names if n not in RunStatus._value2member_map_)
        if unknown:
            known = ", ".join(s.value for s in RunStatus)
            raise BadOption("--status", f"no status {unknown[0]!r}; the statuses are {known}")
        try:
            since = parse_time(args.since) if args.since else None
            until = parse_time(args.until) if args.until else None
        except ValueError as exc:
            raise BadOption("--since/--until", str(exc)) from None
        if args.limit < 1:
            raise BadOption("--limit", f"must be at least 1, got {args.limit}")
        return cls(frozenset(RunStatus(n) for n in names), since, until, args.limit, args.page)


def runs(session: Session, query: RunsQuery, *, as_json: bool) -> int:
    try:
        page = page_of_runs(
            session.reader, lambda ids: cache_for(session.store).load_many(ids),
            statuses=query.statuses, since=query.since, until=query.until,
            limit=query.limit, token=query.page,
        )  # fmt: skip
    except BadPageToken as exc:
        raise BadOption("--page", str(exc)) from None
    rows = [redactor_for(s.spec).value(run_summary(s)) for s in page.states]
    if as_json:
        emit({"runs": rows, "next_page": page.next_token})
        return 0
    for row in rows:
        print(run_row(row))
    _say_next(page)
    return 0


def run_row(row: dict[str, Any]) -> str:
    """One run of `runs`, in columns that line up for every shard's ids."""
    return (
        f"{row['run_id']:<{RUN_ID_WIDTH}}  {row['status']:<17} {row['created_at']}  "
        f"{row['duration_s']:>8.1f}s  ${row['cost_usd']:<8.4f} {row['task'][:50]!r}"
    )


def _say_next(page: Page) -> None:
    if page.next_token:
        say(f"more runs: agentledger runs --page {page.next_token} (with the same options)")


def replay(session: Session, run_id: str, *, as_json: bool) -> int:
    """Re-fold the raw log entry by entry: seq continuity, decoding, legality."""
    entries = session.reader.raw(run_id)
    if not entries:
        return fail(exit_codes.USAGE, "no run", f"no run {run_id!r}", as_json)
    state: RunState | None = None
    for entry in entries:
        try:
            if entry.envelope is None:
                raise entry.broken or InvalidEvent(f"stream entry {entry.entry_id} does not decode")
            env = entry.envelope
            state = apply(state, env)
        except (InvalidEvent, CoreError) as exc:
            if as_json:
                emit({"run_id": run_id, "ok": False, "events": state.seq if state else 0,
                      "broken": {"entry": entry.entry_id, "reason": str(exc)}})  # fmt: skip
            else:
                print(f"BROKEN at entry {entry.entry_id}: {exc}")
            return exit_codes.CHECK_FAILED
        if not as_json:
            print(line(env))
    assert state is not None
    if as_json:
        emit({"run_id": run_id, "ok": True, "events": state.seq, "status": str(state.status),
              "broken": None})  # fmt: skip
    else:
        print(
            f"log ok: {counted(state.seq, 'event')}, no gaps, every transition legal; status {state.status}"
        )
    return 0
