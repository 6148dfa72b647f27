"""Deciding whether a proposed call may run: is the tool registered, are the
arguments valid, does the principal hold the tool's scope, does a person have
to approve it first? Pure: the registry lookup, schema validation and the
approval predicate run in services/ and hand their findings in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from events.state import RunState
from events.status import CallStatus, RunStatus
from events.types import (
    ApprovalRequested,
    Event,
    FieldError,
    ToolCallRejected,
    ToolCallValidated,
    ToolError,
)
from schemas.spec import ToolSpec


def validate_call(
    s: RunState,
    call_id: str,
    *,
    tool: ToolSpec | None,
    known_tools: Sequence[str],
    field_errors: Sequence[FieldError],
    reads: Sequence[str] = (),
    writes: Sequence[str] = (),
    needs_approval: str | None = None,
    now: float = 0.0,
    op_key: str | None = None,
    request_hash: str | None = None,
    resolvable: bool = False,
    output_cap: int | None = None,
) -> list[Event]:
    """`needs_approval` is the reason a person must approve, or None."""
    call = s.call(call_id)
    if (
        s.status is not RunStatus.VALIDATING
        or call is None
        or call.status is not CallStatus.PROPOSED
    ):
        return []
    if tool is None:
        known = ", ".join(sorted(known_tools)) or "none"
        return [_reject(call_id, "unknown_tool", f"no tool named {call.name!r}; tools: {known}")]
    if field_errors:
        what = "; ".join(f"{f.loc}: {f.msg}" for f in field_errors)
        return [_reject(call_id, "invalid_arguments", what, fields=tuple(field_errors))]
    if tool.scope is not None and tool.scope not in s.spec.principal.scopes:
        who = s.spec.principal.id
        return [_reject(call_id, "permission_denied", f"{who!r} lacks scope {tool.scope!r}")]
    cap = s.spec.budgets.tool_timeout_s
    fields: dict[str, Any] = {
        "call_id": call_id,
        "read_only": tool.read_only,
        "reads": tuple(reads),
        "writes": tuple(writes),
        "timeout_s": min(tool.timeout_s, cap) if cap else tool.timeout_s,
        "max_concurrency": tool.max_concurrency,
        "op_key": op_key,
        "request_hash": request_hash,
        "resolvable": resolvable,
        "output_cap": output_cap,
    }
    if needs_approval is not None:
        expires = now + s.spec.policies.approval_timeout_s
        return [ApprovalRequested(**fields, expires_at=expires, reason=needs_approval)]
    return [ToolCallValidated(**fields)]


def _reject(
    call_id: str, code: Any, message: str, fields: tuple[FieldError, ...] = ()
) -> ToolCallRejected:
    error = ToolError(code=code, message=message, retryable=False, fields=fields)
    return ToolCallRejected(call_id=call_id, error=error)
