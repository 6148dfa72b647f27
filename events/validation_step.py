"""Deciding whether a proposed call may run: is the tool in the run's tool set,
are the arguments valid, does the principal hold the tool's scope, does a
person have to approve it first? Pure: the tool set lookup, schema validation,
the resource rules and the approval predicate run in services/ and hand in
one `Finding` per call, gathered before anything is decided."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentledger.events.branching import taken_from_origin
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import (
    ApprovalRequested,
    ErrorCode,
    Event,
    FieldError,
    ToolCallRejected,
    ToolCallValidated,
    ToolError,
)
from agentledger.schemas.spec import ToolSpec


@dataclass(frozen=True, slots=True)
class Finding:
    """What the validator found about one proposed call. `tool` is None when the
    run's tool set has no tool of that name; `approval` is why a person must
    approve, or None."""

    tool: ToolSpec | None
    field_errors: tuple[FieldError, ...] = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    limits: tuple[tuple[str, int], ...] = ()  # concurrency keys filled in, with their max
    approval: str | None = None
    op_key: str | None = None
    request_hash: str | None = None
    resolvable: bool = False  # the tool can look up an unknown outcome
    output_cap: int | None = None
    max_timeout_s: float | None = None  # the operator's maximum for such a call (tool or MCP)
    # a rule of the tool's own (its resources) refused these arguments: the code and why
    # (a path that leaves the workspace names no resource in it: `permission_denied`)
    refused: tuple[ErrorCode, str] | None = None


def undecided(s: RunState) -> list[str]:
    """The calls of the current turn that wait for validation, in proposal order."""
    if s.status is not RunStatus.VALIDATING or s.current_turn is None:
        return []
    return [c.call_id for c in s.current_turn.calls if c.status is CallStatus.PROPOSED]


def validate_turn(
    s: RunState, findings: Mapping[str, Finding], *, known_tools: Sequence[str], now: float
) -> list[Event]:
    """A verdict for every undecided call that has a finding, in proposal order."""
    out: list[Event] = []
    for call_id in undecided(s):
        found = findings.get(call_id)
        if found is not None:
            out += validate_call(s, call_id, found=found, known_tools=known_tools, now=now)
    return out


def validate_call(
    s: RunState, call_id: str, *, found: Finding, known_tools: Sequence[str], now: float
) -> list[Event]:
    call = s.call(call_id)
    if (
        s.status is not RunStatus.VALIDATING
        or call is None
        or call.status is not CallStatus.PROPOSED
    ):
        return []
    tool = found.tool
    if tool is None:
        known = ", ".join(sorted(known_tools)) or "none"
        return [_reject(call_id, "unknown_tool", f"no tool named {call.name!r}; tools: {known}")]
    if found.field_errors:
        what = "; ".join(f"{f.loc}: {f.msg}" for f in found.field_errors)
        return [_reject(call_id, "invalid_arguments", what, fields=found.field_errors)]
    if found.refused is not None:
        return [_reject(call_id, *found.refused)]
    if tool.scope is not None and tool.scope not in s.spec.principal.scopes:
        who = s.spec.principal.id
        return [_reject(call_id, "permission_denied", f"{who!r} lacks scope {tool.scope!r}")]
    fields: dict[str, Any] = {
        "call_id": call_id,
        "read_only": tool.read_only,
        "reads": tuple(found.reads),
        "writes": tuple(found.writes),
        "timeout_s": call_timeout_s(s, tool, found.max_timeout_s),
        "max_concurrency": tool.max_concurrency,
        "limits": dict(found.limits),
        "op_key": found.op_key,
        "request_hash": found.request_hash,
        "resolvable": found.resolvable,
        "output_cap": found.output_cap,
    }
    if found.approval is not None and not taken_from_origin(s.spec, call.turn):
        expires = now + s.spec.policies.approval_timeout_s
        return [ApprovalRequested(**fields, expires_at=expires, reason=found.approval)]
    return [ToolCallValidated(**fields)]


def call_timeout_s(s: RunState, tool: ToolSpec, most: float | None) -> float:
    """A call's timeout: the tool's own, held to the run's `tool_timeout_s` and to the
    operator's maximum, whichever is smaller."""
    limits = [t for t in (tool.timeout_s, s.spec.budgets.tool_timeout_s, most) if t]
    return min(limits)


def _reject(
    call_id: str, code: ErrorCode, message: str, fields: tuple[FieldError, ...] = ()
) -> ToolCallRejected:
    error = ToolError(code=code, message=message, retryable=False, fields=fields)
    return ToolCallRejected(call_id=call_id, error=error)
