"""`context RUN --turn N`: what the model saw at turn N, rebuilt from the log and
checked against the hash its ModelRequested recorded; `raw RUN`: the log's
entries as stored, secrets included when the spec kept them — the one command
that prints them unredacted, and it says so."""

from __future__ import annotations

import json
import sys
from typing import Any

from agentledger.events.context_view import ContextView, canonical
from agentledger.events.counted import counted
from agentledger.events.fold import fold
from agentledger.events.mcp_policy import modules_of
from agentledger.events.types import ModelRequested
from agentledger.schemas.content import Message, to_api
from agentledger.schemas.context import ContextDecision
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.models.providers import provider_of
from agentledger.services.adapters.tools.toolset import ToolSetError, load_toolset
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.handlers.model import context_view, model_request
from agentledger.services.handlers.spec_check import tool_paths
from agentledger.services.session import Session


def context(session: Session, run_id: str, *, turn: int, attempt: int | None, as_json: bool) -> int:
    envs = session.store.read(run_id)
    if not envs:
        print(f"agentledger: no run {run_id!r}", file=sys.stderr)
        return exit_codes.USAGE
    at = _request_at(envs, turn, attempt)
    if at is None:
        print(f"agentledger: {no_request(envs, run_id, turn, attempt)}", file=sys.stderr)
        return exit_codes.USAGE
    requested: ModelRequested = envs[at].data
    state = fold(envs[:at])
    assert state is not None
    try:
        modules = modules_of(state.spec.tools)  # MCP servers are not started to show a view
        toolset = load_toolset(modules, tool_paths(state.spec, state.base_dir))
    except ToolSetError as exc:
        print(f"agentledger: cannot rebuild the view: {exc}", file=sys.stderr)
        return exit_codes.CHECK_FAILED
    view = context_view(toolset, state)
    verified = requested.context_hash == view.digest
    if as_json:
        print(json.dumps(_as_json(requested, view, verified, state.spec, run_id)))
    else:
        _print(requested, view, verified)
    if requested.context_hash is None:
        print("agentledger: this request recorded no context hash: not verifiable", file=sys.stderr)
        return exit_codes.CHECK_FAILED
    if not verified:
        print(
            f"agentledger: context hash mismatch at turn {turn}: recorded "
            f"{requested.context_hash}, rebuilt {view.digest} (the log, the tool modules or "
            "the secrets set in this environment differ from when the request was made)",
            file=sys.stderr,
        )
        return exit_codes.CHECK_FAILED
    return 0


def raw(session: Session, run_id: str, *, after_seq: int) -> int:
    envs = session.store.read(run_id, after_seq=after_seq)
    if not envs and not session.store.read(run_id)[:1]:
        print(f"agentledger: no run {run_id!r}", file=sys.stderr)
        return exit_codes.USAGE
    print("agentledger: raw log entries, not redacted", file=sys.stderr)
    for env in envs:
        print(env.model_dump_json(), flush=True)
    return 0


def describe_decision(d: ContextDecision) -> str:
    turns = (
        f"turn {d.first_turn}"
        if d.first_turn == d.last_turn
        else f"turns {d.first_turn}-{d.last_turn}"
    )
    match d.action:
        case "withdrawn":
            return f"withdrew {counted(d.items, 'refused turn')}, {turns} (the log keeps them)"
        case "shortened":
            results = counted(d.items, "tool result")
            return f"shortened {results} of {turns}: {d.chars_before:,} -> {d.chars_after:,} chars"
        case "omitted":
            return f"omitted {turns} ({counted(d.items, 'turn')}, {d.chars_before:,} chars)"
    return f"over budget: {d.chars_before:,} chars for a budget of {d.chars_after:,}"


def no_request(envs: list[Envelope[Any]], run_id: str, turn: int, attempt: int | None) -> str:
    """Why there is no request to show: the turn's attempts, else the run's turns."""
    asked = [e.data for e in envs if isinstance(e.data, ModelRequested)]
    attempts = sorted({r.attempt for r in asked if r.turn == turn})
    if attempts:
        which = "attempt" if len(attempts) == 1 else "attempts"
        return (
            f"turn {turn} of run {run_id!r} had {counted(len(attempts), 'attempt')} "
            f"({which} {_listed(attempts)}): there is no attempt {attempt}"
        )
    turns = sorted({r.turn for r in asked})
    if not turns:
        return f"run {run_id!r} has no model request for turn {turn}: it made no model request"
    span = f"turn {turns[0]}" if len(turns) == 1 else f"turns {turns[0]} to {turns[-1]}"
    return f"run {run_id!r} has no model request for turn {turn}: its requests are for {span}"


def _listed(numbers: list[int]) -> str:
    text = ", ".join(str(n) for n in numbers)
    return " and ".join(text.rsplit(", ", 1))


def _request_at(envs: list[Envelope[Any]], turn: int, attempt: int | None) -> int | None:
    """The index of the turn's (last, or given) ModelRequested."""
    found = [
        i
        for i, env in enumerate(envs)
        if isinstance(env.data, ModelRequested)
        and env.data.turn == turn
        and attempt in (None, env.data.attempt)
    ]
    return found[-1] if found else None


def _as_json(
    requested: ModelRequested, view: ContextView, verified: bool, spec: RunSpec, run_id: str
) -> dict[str, Any]:
    wire = None
    to_wire = provider_of(spec.model).wire
    if to_wire is not None:  # the body as the adapter sends it (Claude's: breakpoints included)
        wire = to_wire(spec.model, model_request(run_id, requested, view))
    return {
        "turn": requested.turn,
        "model": requested.model,
        "attempt": requested.attempt,
        "recorded_hash": requested.context_hash,
        "hash": view.digest,
        "verified": verified,
        "tokens": view.tokens,
        "budget_tokens": view.budget_tokens,
        "decisions": [d.model_dump() for d in view.decisions],
        "request": json.loads(canonical(view.system, view.tools, view.messages)),
        "wire": wire,
    }


def _print(requested: ModelRequested, view: ContextView, verified: bool) -> None:
    check = "verified" if verified else "MISMATCH"
    model = f" to {requested.model}" if requested.model else ""
    print(
        f"turn {requested.turn} (attempt {requested.attempt}){model}: hash {view.digest[:16]}… {check}"
    )
    print(f"~{view.tokens:,} tokens of a {view.budget_tokens:,} token budget")
    for d in view.decisions:
        print(f"  {describe_decision(d)}")
    print(f"system: {view.system!r}")
    print(f"tools: {', '.join(t.name for t in view.tools) or '(none)'}")
    if view.server_tools:
        names = ", ".join(f"{t.get('name')} ({t.get('type')})" for t in view.server_tools)
        print(f"server tools (the provider runs them): {names}")
    for m in view.messages:
        _print_message(m)


def _print_message(m: Message) -> None:
    print(f"--- {m.role}")
    for b in m.content:
        body = {k: v for k, v in to_api(b).items() if k != "type"}
        print(f"[{b.type}] {json.dumps(body, ensure_ascii=False)}")
